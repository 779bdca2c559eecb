package check_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/detsim"
	"loam.dev/router/detsim/check"
	"loam.dev/router/detsim/model"
	_ "loam.dev/router/detsim/simtest" // the replay flags
)

func txnOp(id, inv, done int64, o check.Outcome, reads [][]int64, ops ...model.Op) *check.Op {
	return &check.Op{ID: id, Kind: "txn", Txn: model.Txn{ID: id, Ops: ops}, Invoke: inv, Complete: done, Outcome: o, Reads: reads}
}

func app(k string, v int64) model.Op { return model.Op{Kind: model.OpAppend, Key: k, Value: v} }
func rd(k string) model.Op           { return model.Op{Kind: model.OpRead, Key: k} }

func TestListAppend(t *testing.T) {
	final := map[string][]int64{"k": {1, 2, 3}}
	f := func(k string) []int64 { return final[k] }
	ok := &check.History{Ops: []*check.Op{
		txnOp(1, 0, 5, check.OK, nil, app("k", 1)),
		txnOp(2, 6, 9, check.OK, [][]int64{{1, 2}}, app("k", 2), rd("k")),
		txnOp(3, 7, 8, check.Unknown, nil, app("k", 3)),
		txnOp(4, 7, 8, check.Unknown, nil, app("k", 4)), // may not have applied: absent is fine
		txnOp(5, 10, 11, check.Failed, nil, app("k", 5)),
		txnOp(6, 1, 2, check.OK, [][]int64{{}}, rd("k")),
	}}
	require.Nil(t, check.ListAppend(ok, f))

	cases := map[string]*check.Op{
		"no-lost-ack":    txnOp(7, 12, 13, check.OK, nil, app("k", 7)),
		"no-phantom":     txnOp(8, 12, 13, check.Failed, nil, app("k", 3)),
		"list-append-si": txnOp(9, 12, 13, check.OK, [][]int64{{1, 3}}, rd("k")),
	}
	for want, bad := range cases {
		h := &check.History{Ops: append(append([]*check.Op(nil), ok.Ops...), bad)}
		v := check.ListAppend(h, f)
		require.NotNil(t, v, want)
		require.Equal(t, want, v.Invariant)
	}
	stale := &check.History{Ops: append(append([]*check.Op(nil), ok.Ops...), txnOp(10, 20, 21, check.OK, [][]int64{{1}}, rd("k")))}
	v := check.ListAppend(stale, f)
	require.NotNil(t, v)
	require.Contains(t, v.Detail, "stale read")
	final["k"] = []int64{1, 2, 2}
	v = check.ListAppend(ok, f)
	require.NotNil(t, v)
	require.Contains(t, v.Detail, "appears twice")
}

func TestClassify(t *testing.T) {
	require.Equal(t, check.OK, check.Classify(nil))
	require.Equal(t, check.Unknown, check.Classify(&detsim.IndeterminateError{Cause: "timeout"}))
	require.Equal(t, check.Failed, check.Classify(&detsim.RefusedError{}))
	require.Equal(t, check.Failed, check.Classify(&adapters.BackendError{Code: model.CodeLoginRefused}))
	require.Equal(t, check.Unknown, check.Classify(&adapters.BackendError{Code: model.CodeTerminated}), "a session ended under the transaction may have committed it")
	require.Equal(t, check.Failed, check.Classify(&adapters.RouterError{Code: "3D000"}))
	require.Equal(t, check.Failed, check.Classify(model.ErrAborted))
	require.Equal(t, check.Unknown, check.Classify(errors.New("anything else")))
}

func backendWith(name string, accepts []model.Accept, fences []model.Fence) *model.Backend {
	b := model.NewBackend(nil, name, "app")
	b.Accepted, b.Fences = accepts, fences
	return b
}

func TestOneSideServes(t *testing.T) {
	side := map[string]int{"src": 0, "dst": 1}
	w := func(b string, t int64) model.Accept {
		return model.Accept{T: t, Step: int(t), Backend: b, Writes: true}
	}
	fence := func(b string, t int64) model.Fence {
		return model.Fence{T: t, Step: int(t), Backend: b, Role: "app", On: true}
	}
	// Forward with the fence, then a reverse with the destination fenced: fine.
	src := backendWith("src", []model.Accept{w("src", 1), w("src", 5), w("src", 30)}, []model.Fence{fence("src", 6)})
	dst := backendWith("dst", []model.Accept{w("dst", 10), w("dst", 20)}, []model.Fence{fence("dst", 25)})
	require.Nil(t, check.OneSideServes([]*model.Backend{src, dst}, side, "app"))
	// No fence of the source before the destination served.
	src = backendWith("src", []model.Accept{w("src", 1), w("src", 5)}, nil)
	dst = backendWith("dst", []model.Accept{w("dst", 10)}, nil)
	v := check.OneSideServes([]*model.Backend{src, dst}, side, "app")
	require.NotNil(t, v, "the destination served while the source was never fenced")
	src = backendWith("src", []model.Accept{w("src", 1), w("src", 5)}, []model.Fence{fence("src", 6)})
	require.Nil(t, check.OneSideServes([]*model.Backend{src, dst}, side, "app"))
	require.NotNil(t, check.OneSideServes([]*model.Backend{src, dst}, side, "other-role"), "the fence must be of the app role")
	src = backendWith("src", []model.Accept{w("src", 1), w("src", 5), w("src", 15)}, []model.Fence{fence("src", 6)})
	v = check.OneSideServes([]*model.Backend{src, dst}, side, "app")
	require.NotNil(t, v)
	require.Equal(t, "one-side-serves", v.Invariant)
}

func TestAtomic(t *testing.T) {
	b0 := model.NewBackend(nil, "b0", "app")
	b1 := model.NewBackend(nil, "b1", "app")
	_, err := b0.Prepare("app", 0, "__pgdog_2pc_d_i_1_0", model.Txn{ID: 1, Ops: []model.Op{{Kind: model.OpAdd, Key: "x", Value: -5}}})
	require.NoError(t, err)
	_, err = b1.Prepare("app", 0, "__pgdog_2pc_d_i_1_1", model.Txn{ID: 1, Ops: []model.Op{{Kind: model.OpAdd, Key: "y", Value: 5}}})
	require.NoError(t, err)
	bs := []*model.Backend{b0, b1}
	require.Nil(t, check.Atomic(bs, nil, "monitor", 0), "in doubt is not a violation")
	_, err = b0.Resolve("", 0, "__pgdog_2pc_d_i_1_0", true, "coord")
	require.NoError(t, err)
	require.Nil(t, check.Atomic(bs, nil, "monitor", 0), "half committed, half still prepared: the prepared half counts")
	_, err = b1.Resolve("", 0, "__pgdog_2pc_d_i_1_1", false, "coord")
	require.NoError(t, err)
	v := check.Atomic(bs, nil, "monitor", 0)
	require.NotNil(t, v)
	require.Equal(t, "2pc-atomic", v.Invariant)

	b2 := model.NewBackend(nil, "b2", "app")
	_, err = b2.Prepare("app", 0, "__pgdog_2pc_d_i_2_0", model.Txn{ID: 2, Ops: []model.Op{{Kind: model.OpAdd, Key: "z", Value: 1}}})
	require.NoError(t, err)
	_, err = b2.Resolve("", 0, "__pgdog_2pc_d_i_2_0", true, "monitor")
	require.NoError(t, err)
	v = check.Atomic([]*model.Backend{b2}, nil, "monitor", 0)
	require.Equal(t, "indoubt-never-resolves", v.Invariant)
	v = check.Atomic([]*model.Backend{b2}, nil, "someone-else", 0)
	require.Equal(t, "conservation", v.Invariant)
}

// TestReleasedWritableDuplicates: a refusal by a fenced backend is a violation when the
// instance sent the transaction there after the fence, and not when it was sent before (the
// fence doing its work) — also when the network delivered the client's request twice and
// the second copy, held by the pause, went to the new layout after the fence (seed 12054555
// of the cutover scenario: the checker once judged the refusal by the last send only).
func TestReleasedWritableDuplicates(t *testing.T) {
	fenced := &model.Backend{Name: "shard-0", Fences: []model.Fence{{Step: 10, Backend: "shard-0", Role: "app", On: true}}}
	fresh := &model.Backend{Name: "shard-2"}
	refused := func() *check.History {
		return &check.History{Ops: []*check.Op{{ID: 17, Kind: "txn", Via: "pgdog-1", Outcome: check.Unknown, Code: model.CodeTerminated, Backend: "shard-0"}}}
	}
	run := func(sends ...model.Dispatch) *detsim.Violation {
		r := &model.Router{ID: "pgdog-1", Dispatched: map[int64][]model.Dispatch{17: sends}}
		return check.ReleasedWritable(refused(), []*model.Router{r}, []*model.Backend{fenced, fresh}, "app", map[string]bool{})
	}
	require.Nil(t, run(model.Dispatch{Step: 5, Backend: "shard-0"}), "sent before the fence")
	v := run(model.Dispatch{Step: 12, Backend: "shard-0"})
	require.NotNil(t, v, "sent to a backend fenced since step 10")
	require.Equal(t, "released-writable", v.Invariant)
	require.Nil(t, run(model.Dispatch{Step: 5, Backend: "shard-0"}, model.Dispatch{Step: 40, Backend: "shard-2"}),
		"the refused copy went before the fence; the duplicate went to the new layout")
	require.NotNil(t, run(model.Dispatch{Step: 12, Backend: "shard-0"}, model.Dispatch{Step: 40, Backend: "shard-2"}))
}
