package model_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/detsim"
	"loam.dev/router/detsim/model"
	"loam.dev/router/kernel/shardmap"
)

// world is a small simulated fleet: one source shard, two destination shards, two router
// instances reading the same files, and a client.
type world struct {
	s       *detsim.Sim
	files   *model.Files
	dir     model.Directory
	r0, r1  *model.Router
	client  detsim.NodeID
	rec     *shardmap.Record
	nextTxn int64
}

// forcedSim is a simulator with seed 1 whose only faults are the firings force lists
// (point#N).
func forcedSim(force ...detsim.Firing) *detsim.Sim {
	cfg := detsim.Config{Seed: 1}
	if len(force) > 0 {
		cfg.AllFaults = true
		cfg.Schedule = &detsim.Schedule{Faults: force}
		for _, f := range force {
			cfg.Points = append(cfg.Points, f.Point)
		}
	}
	return detsim.New(cfg)
}

// newWorld builds the world; force lists fault firings to inject (point#N).
func newWorld(t *testing.T, force ...detsim.Firing) *world {
	t.Helper()
	s := forcedSim(force...)
	w := &world{s: s, dir: model.Directory{}}
	for _, n := range []string{"shard-0", "shard-1", "shard-2"} {
		w.dir[n] = model.NewBackend(s, n, "app", "")
	}
	w.rec = shardmap.NewPgHash("app", shardmap.Key{Column: "id", Type: shardmap.Bigint},
		shardmap.Backend{Host: "shard-0", Port: 5432, Database: "app"})
	tgt := shardmap.Layout{Scheme: shardmap.PgHash{Key: shardmap.Key{Column: "id", Type: shardmap.Bigint}, Shards: 2}}
	for i, n := range []string{"shard-1", "shard-2"} {
		tgt.Shards = append(tgt.Shards, shardmap.Shard{Name: "t" + string(rune('0'+i)), Backend: shardmap.Backend{Host: n, Port: 5432, Database: "app"}, Fence: shardmap.FenceOpen})
	}
	w.rec.Target = &tgt
	w.rec.State = shardmap.State{Phase: shardmap.Resharding, To: 2}
	w.files = model.NewFiles(s, 1, model.Render(w.rec, true))
	w.r0 = model.NewRouter(s, "pgdog-0", "app", w.files, w.dir)
	w.r1 = model.NewRouter(s, "pgdog-1", "app", w.files, w.dir)
	w.client = s.Net.AddNode("client")
	return w
}

type answer struct {
	done  bool
	reads [][]int64
	err   error
}

// query sends a transaction through r and returns where its answer will land.
func (w *world) query(r *model.Router, ops ...model.Op) *answer {
	w.nextTxn++
	a := &answer{}
	txn := model.Txn{ID: w.nextTxn, Ops: ops}
	w.s.Net.Call(w.client, r.Node, "query", 0, func(rep detsim.Reply) { r.Query("app", txn, rep) }, func(v any, err error) {
		a.done, a.err = true, err
		if v != nil {
			a.reads = v.([][]int64)
		}
	})
	return a
}

func (w *world) settle() { w.s.Run(w.s.Now()+60_000, 1_000_000) }

func appendOp(k string, v int64) model.Op { return model.Op{Kind: model.OpAppend, Key: k, Value: v} }
func readOp(k string) model.Op            { return model.Op{Kind: model.OpRead, Key: k} }

func TestRouterRoutesPausesAndResumes(t *testing.T) {
	w := newWorld(t)
	a := w.query(w.r0, appendOp("k1", 1))
	w.settle()
	require.True(t, a.done)
	require.NoError(t, a.err)
	require.Equal(t, []int64{1}, w.dir["shard-0"].Row("k1"))

	require.NoError(t, w.r0.Pause("app"))
	a = w.query(w.r0, appendOp("k1", 2))
	w.s.Run(w.s.Now()+500, 1000) // less than a call timeout
	require.False(t, a.done, "a paused database holds the query")
	require.Equal(t, []int64{1}, w.dir["shard-0"].Row("k1"))
	require.NoError(t, w.r0.Resume("app"))
	w.settle()
	require.True(t, a.done)
	require.NoError(t, a.err)
	require.Equal(t, []int64{1, 2}, w.dir["shard-0"].Row("k1"))
	r := w.query(w.r1, readOp("k1"))
	w.settle()
	require.Equal(t, [][]int64{{1, 2}}, r.reads)
}

func TestFenceEndsSessionsAndRefusesLogins(t *testing.T) {
	w := newWorld(t)
	w.query(w.r0, appendOp("k", 1))
	w.settle()
	require.NoError(t, w.dir["shard-0"].FenceWrites("app"))
	a := w.query(w.r0, appendOp("k", 2)) // on the session the fence ended
	w.settle()
	var be *adapters.BackendError
	require.ErrorAs(t, a.err, &be)
	require.Equal(t, model.CodeTerminated, be.Code)
	require.ErrorIs(t, a.err, adapters.ErrFenced)
	a = w.query(w.r0, appendOp("k", 3)) // a new login
	w.settle()
	require.ErrorAs(t, a.err, &be)
	require.Equal(t, model.CodeLoginRefused, be.Code)
	require.ErrorIs(t, a.err, adapters.ErrFenced)
	require.Equal(t, []int64{1}, w.dir["shard-0"].Row("k"), "nothing written while fenced")
	require.NoError(t, w.dir["shard-0"].UnfenceWrites("app"))
	a = w.query(w.r0, appendOp("k", 4))
	w.settle()
	require.NoError(t, a.err)
	require.Equal(t, []int64{1, 4}, w.dir["shard-0"].Row("k"))
}

func TestReloadAndRestartReadTheFiles(t *testing.T) {
	w := newWorld(t)
	next := w.rec.Clone()
	next.Generation = 2
	next.Layout, next.Target = *w.rec.Target, nil
	require.NoError(t, w.files.Write(2, model.Render(next, true)))
	require.Equal(t, uint64(1), w.r0.Generation(), "files are read on RELOAD, not when written")
	ap, err := w.r0.Reload()
	require.NoError(t, err)
	require.Equal(t, uint64(2), ap.Generation)
	require.Equal(t, []string{"shard-1", "shard-2"}, w.r0.Routes("app"))
	w.r1.Crash()
	require.False(t, w.r1.Up())
	w.r1.Boot()
	require.Equal(t, uint64(2), w.r1.Generation(), "a restarted instance reads the files")
	err = w.files.Write(1, model.Render(w.rec, true))
	require.ErrorIs(t, err, model.ErrNewerGeneration)
}

func TestReloadFailsAfterParse(t *testing.T) {
	w := newWorld(t, detsim.Firing{Point: "pgdog.reload.after_parse", N: 1})
	next := w.rec.Clone()
	next.Generation = 2
	require.NoError(t, w.files.Write(2, model.Render(next, true)))
	_, err := w.r0.Reload()
	var re *adapters.RouterError
	require.ErrorAs(t, err, &re)
	require.Equal(t, uint64(1), w.r0.Generation(), "the old generation stays loaded")
	_, err = w.r0.Reload()
	require.NoError(t, err)
	require.Equal(t, uint64(2), w.r0.Generation())
}

func TestCopyCutoverReverseStream(t *testing.T) {
	w := newWorld(t)
	src, d1, d2 := w.dir["shard-0"], w.dir["shard-1"], w.dir["shard-2"]
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for i, k := range keys {
		w.query(w.r0, appendOp(k, int64(i)))
	}
	w.settle()
	id, err := w.r0.CopyData("app", model.ReshardName("app", 1), "slot_app_1")
	require.NoError(t, err)
	require.Equal(t, int64(0), w.r0.SlotLag("slot_app_1", 1), "the slot shows its lag from COPY_DATA on: nothing written since")
	require.Equal(t, int64(-1), w.r0.SlotLag("slot_app_1", 2), "one source shard, one slot: a second shard's is not listed")
	w.settle()
	for i, k := range keys { // writes during replication are streamed
		w.query(w.r1, appendOp(k, int64(100+i)))
	}
	w.settle()
	require.Equal(t, int64(0), w.r0.SlotLag("slot_app_1", 1))
	for _, k := range keys {
		dst := []*model.Backend{d1, d2}[model.Route(k, 2)]
		require.Equal(t, src.Row(k), dst.Row(k), "key %s", k)
	}
	require.NoError(t, src.FenceWrites("app"))
	var cut *answer = &answer{}
	w.r0.Cutover(id, func(_ any, err error) { cut.done, cut.err = true, err })
	w.settle()
	require.True(t, cut.done)
	require.NoError(t, cut.err)
	require.Equal(t, []string{"shard-1", "shard-2"}, w.r0.Routes("app"), "d swapped in memory")
	require.Equal(t, []string{"shard-0"}, w.r1.Routes("app"), "another instance did not")
	ok := w.query(w.r0, appendOp("a", 999))
	stale := w.query(w.r1, appendOp("a", 998))
	w.settle()
	require.NoError(t, ok.err)
	require.ErrorIs(t, stale.err, adapters.ErrFenced, "the fence stops the instance that missed the cutover")
	require.Contains(t, src.Row("a"), int64(999), "the reverse stream keeps the source current")
	require.NotContains(t, src.Row("a"), int64(998))
	var rev *model.Task
	for _, tk := range w.r0.Tasks() {
		if tk.Kind == "replication" {
			rev = tk
		}
	}
	require.NotNil(t, rev)
	w.r0.Cutover(rev.ID, func(_ any, err error) { cut.err = err })
	w.settle()
	require.NoError(t, cut.err)
	require.Equal(t, []string{"shard-0"}, w.r0.Routes("app"), "rolling back swaps back")
}

// TestLateCopyAfterTheSwapCollides: a COPY_DATA that lands after the CUTOVER swapped the
// two databases' names copies the new layout back into the old one. PgDog's copy is a plain
// COPY, so the keys the old shards hold fail it (23505) before it loads or streams anything:
// without that, a second stream would apply the destination's writes to the source again,
// beside the reverse stream (detsim seed 94524826151418 of cutover-windows).
func TestLateCopyAfterTheSwapCollides(t *testing.T) {
	w := newWorld(t)
	src := w.dir["shard-0"]
	for i, k := range []string{"a", "b", "c", "d"} {
		w.query(w.r0, appendOp(k, int64(i)))
	}
	w.settle()
	dst := model.ReshardName("app", 1)
	id, err := w.r0.CopyData("app", dst, "slot_app_1")
	require.NoError(t, err)
	w.settle()
	require.NoError(t, src.FenceWrites("app"))
	cut := &answer{}
	w.r0.Cutover(id, func(_ any, err error) { cut.done, cut.err = true, err })
	w.settle()
	require.NoError(t, cut.err)
	before := src.Rows()

	late, err := w.r0.CopyData("app", dst, "slot_app_1") // the first try, delivered late
	require.NoError(t, err, "COPY_DATA answers at once: the copy runs in the task")
	w.settle()
	var task *model.Task
	for _, tk := range w.r0.Tasks() {
		if tk.ID == late {
			task = tk
		}
	}
	require.NotNil(t, task)
	require.Contains(t, task.Status, "23505", "the copy of the new layout into the old one collides")
	require.Equal(t, before, src.Rows(), "nothing loaded into the old shards")
	ok := w.query(w.r0, appendOp("a", 999))
	w.settle()
	require.NoError(t, ok.err)
	require.Equal(t, 1, countOf(src.Row("a"), 999), "the reverse stream alone carries the write to the old shard")
}

func countOf(xs []int64, x int64) (n int) {
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}

func TestCrashLosesTasksAndHolds(t *testing.T) {
	w := newWorld(t)
	_, err := w.r0.CopyData("app", model.ReshardName("app", 1), "s")
	require.NoError(t, err)
	require.NoError(t, w.r0.Pause("app"))
	a := w.query(w.r0, appendOp("k", 1))
	w.s.Run(w.s.Now()+100, 100)
	w.r0.Crash()
	w.settle()
	require.ErrorIs(t, a.err, detsim.ErrIndeterminate, "a held query's client sees the reset")
	w.r0.Boot()
	require.Empty(t, w.r0.Tasks())
	require.False(t, w.r0.Paused("app"))
}

func balances(w *world) (sum int64) {
	for _, b := range w.dir {
		for _, v := range b.Rows() {
			sum += v[0]
		}
	}
	return sum
}

func (w *world) transfer(from, to string, amount int64) *answer {
	w.nextTxn++
	a := &answer{}
	id := w.nextTxn
	w.s.Net.Call(w.client, w.r0.Node, "transfer", 0, func(rep detsim.Reply) { w.r0.Transfer("app", id, from, to, amount, rep) },
		func(_ any, err error) { a.done, a.err = true, err })
	return a
}

// twoShards moves the world to the two-shard layout so transfers cross shards.
func twoShards(t *testing.T, w *world) (string, string) {
	next := w.rec.Clone()
	next.Generation = 2
	next.Layout, next.Target = *w.rec.Target, nil
	require.NoError(t, w.files.Write(2, model.Render(next, true)))
	_, err := w.r0.Reload()
	require.NoError(t, err)
	var on [2]string
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		on[model.Route(k, 2)] = k
	}
	require.NotEmpty(t, on[0])
	require.NotEmpty(t, on[1])
	return on[0], on[1]
}

func TestTwoPhaseCommitCommits(t *testing.T) {
	w := newWorld(t)
	x, y := twoShards(t, w)
	a := w.transfer(x, y, 10)
	w.settle()
	require.NoError(t, a.err)
	require.Equal(t, []int64{-10}, w.dir["shard-1"].Row(x))
	require.Equal(t, []int64{10}, w.dir["shard-2"].Row(y))
	require.Zero(t, balances(w))
	require.Empty(t, w.dir["shard-1"].Prepared())
	require.Empty(t, w.r0.Coordinator().InDoubt())
}

func TestCoordinatorCrashAfterPrepareRecovers(t *testing.T) {
	w := newWorld(t, detsim.Firing{Point: "coord.crash.after_prepare", N: 1})
	x, y := twoShards(t, w)
	a := w.transfer(x, y, 10)
	w.settle()
	require.ErrorIs(t, a.err, detsim.ErrIndeterminate)
	require.Len(t, w.dir["shard-1"].Prepared(), 1, "in doubt while the coordinator is down")
	require.Len(t, w.dir["shard-2"].Prepared(), 1)
	w.r0.Boot()
	w.settle()
	require.Empty(t, w.dir["shard-1"].Prepared(), "recovery rolls back what was not decided")
	require.Empty(t, w.dir["shard-2"].Prepared())
	require.Zero(t, balances(w))
	require.Empty(t, w.dir["shard-1"].Row(x))
}

func TestCoordinatorCrashAfterDecisionCommitsOnRecovery(t *testing.T) {
	w := newWorld(t, detsim.Firing{Point: "coord.crash.after_decision", N: 1})
	x, y := twoShards(t, w)
	w.transfer(x, y, 10)
	w.settle()
	w.r0.Boot()
	w.settle()
	require.Equal(t, []int64{-10}, w.dir["shard-1"].Row(x))
	require.Equal(t, []int64{10}, w.dir["shard-2"].Row(y))
}

func TestLostWALLeavesTransactionsInDoubt(t *testing.T) {
	w := newWorld(t, detsim.Firing{Point: "coord.crash.after_prepare", N: 1}, detsim.Firing{Point: "coord.wal.lost", N: 1})
	x, y := twoShards(t, w)
	w.transfer(x, y, 10)
	w.settle()
	w.r0.Boot()
	w.settle()
	p := w.dir["shard-1"].Prepared()
	require.Len(t, p, 1, "without its log the coordinator cannot finish")
	require.Regexp(t, `^__pgdog_2pc_sim-app_pgdog-0_1_0$`, p[0].GID)
	require.Len(t, w.dir["shard-2"].Prepared(), 1)
}

func TestAckEarlyLosesAnAcknowledgedWrite(t *testing.T) {
	for _, early := range []bool{false, true} {
		w := newWorld(t)
		w.dir["shard-0"].AckEarly = early
		a := w.query(w.r0, appendOp("k", 1))
		for !a.done {
			w.s.Run(math.MaxInt64, 1)
		}
		require.NoError(t, a.err)
		w.dir["shard-0"].Crash()
		w.dir["shard-0"].Boot()
		if early {
			require.Empty(t, w.dir["shard-0"].Row("k"), "the mutant loses what it acknowledged")
		} else {
			require.Equal(t, []int64{1}, w.dir["shard-0"].Row("k"))
		}
	}
}

func TestStoreConflictFault(t *testing.T) {
	s := detsim.New(detsim.Config{Seed: 1, AllFaults: true, Points: []string{"store.cas.conflict"},
		Schedule: &detsim.Schedule{Faults: []detsim.Firing{{Point: "store.cas.conflict", N: 1}}}})
	st := model.NewStore(s)
	db := adapters.DBRef{Namespace: "ns", Database: "app"}
	rec := shardmap.NewPgHash("app", shardmap.Key{Column: "id", Type: shardmap.Bigint}, shardmap.Backend{Host: "h", Port: 1, Database: "app"})
	_, err := st.CAS(db, 0, rec) // no record yet: the fault is not evaluated
	require.NoError(t, err)
	_, err = st.CAS(db, 1, rec)
	var ce *adapters.ConflictError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, uint64(2), ce.Current.Version, "another writer bumped the version")
	require.True(t, st.Writes[1].Injected)
	v, err := st.CAS(db, 2, rec)
	require.NoError(t, err)
	require.Equal(t, uint64(3), v)
	var got []uint64
	st.Watch(db, 2, func(r *shardmap.Record) { got = append(got, r.Version) })
	require.Equal(t, []uint64{3}, got, "a watch on an older version answers at once")
	st.Watch(db, 3, func(r *shardmap.Record) { got = append(got, r.Version) })
	_, err = st.CAS(db, 3, rec)
	require.NoError(t, err)
	require.Equal(t, []uint64{3, 4}, got)
}

func TestFilesWriteFault(t *testing.T) {
	s := detsim.New(detsim.Config{Seed: 1, AllFaults: true, Points: []string{"files.write.fail"},
		Schedule: &detsim.Schedule{Faults: []detsim.Firing{{Point: "files.write.fail", N: 1}}}})
	f := model.NewFiles(s, 1, nil)
	require.True(t, errors.Is(f.Write(2, nil), model.ErrWriteRefused))
	g, _ := f.Read()
	require.Equal(t, uint64(1), g)
	require.NoError(t, f.Write(2, nil))
}

// TestFilesProjectionDelay: with ProjectionDelay a pod sees a write only after its own
// lag (at most the delay), never an older one again once it saw the newer; Read (the API
// object) has it at once; zero delay is Read for everyone.
func TestFilesProjectionDelay(t *testing.T) {
	s := detsim.New(detsim.Config{Seed: 1})
	f := model.NewFiles(s, 1, nil)
	f.ProjectionDelay = 5000
	var seen []map[string]uint64
	s.At(100, detsim.Label{Kind: "op", What: "write"}, func() { require.NoError(t, f.Write(2, nil)) })
	for at := int64(100); at <= 5200; at += 50 {
		s.At(at, detsim.Label{Kind: "op", What: "look"}, func() {
			m := map[string]uint64{}
			for _, pod := range []string{"pgdog-0", "pgdog-1", "pgdog-2"} {
				m[pod], _ = f.ReadAs(pod)
			}
			seen = append(seen, m)
		})
	}
	s.Run(10_000, 1_000_000)
	g, _ := f.Read()
	require.Equal(t, uint64(2), g)
	lagged := false
	for i, m := range seen {
		for pod, g := range m {
			if g == 1 {
				lagged = true
			}
			if i > 0 && seen[i-1][pod] > g {
				t.Fatalf("%s went back from %d to %d", pod, seen[i-1][pod], g)
			}
		}
	}
	require.True(t, lagged, "some pod sees generation 1 after the write")
	require.Equal(t, map[string]uint64{"pgdog-0": 2, "pgdog-1": 2, "pgdog-2": 2}, seen[len(seen)-1], "every pod sees it within the delay")
	f.ProjectionDelay = 0
	g, _ = f.ReadAs("pgdog-0")
	require.Equal(t, uint64(2), g)
}

// TestRetriedCopyDataStartsASecondTask: PgDog runs a task per COPY_DATA and reuses a slot
// that exists, so a retry whose first try is running starts a second task. Exactly one of
// the two streams; the other fails at its copy when the keys are there (23505) or, with
// nothing to copy, at its stream, since the slot is in use (55006). Either way the
// destination holds each write once.
func TestRetriedCopyDataStartsASecondTask(t *testing.T) {
	for _, keys := range [][]string{{"a", "b", "c", "d"}, nil} {
		w := newWorld(t)
		d1, d2 := w.dir["shard-1"], w.dir["shard-2"]
		for i, k := range keys {
			w.query(w.r0, appendOp(k, int64(i)))
		}
		w.settle()
		dst := model.ReshardName("app", 1)
		first, err := w.r0.CopyData("app", dst, "slot_app_1")
		require.NoError(t, err)
		retry, err := w.r0.CopyData("app", dst, "slot_app_1")
		require.NoError(t, err, "the slot exists: PgDog reuses it")
		require.NotEqual(t, first, retry, "a task per COPY_DATA")
		w.settle()
		var streaming, failed []string
		for _, tk := range w.r0.Tasks() {
			switch {
			case tk.Inner == "replicating":
				streaming = append(streaming, tk.Status)
			case strings.HasPrefix(tk.Status, "failed"):
				failed = append(failed, tk.Status)
			}
		}
		require.Len(t, streaming, 1, "keys %v: one task streams", keys)
		require.Len(t, failed, 1, "keys %v", keys)
		want := "55006"
		if len(keys) > 0 {
			want = "23505"
		}
		require.Contains(t, failed[0], want, "keys %v", keys)
		w.query(w.r1, appendOp("e", 99))
		w.settle()
		for _, k := range append(keys, "e") {
			dst := []*model.Backend{d1, d2}[model.Route(k, 2)]
			require.Equal(t, w.dir["shard-0"].Row(k), dst.Row(k), "keys %v: key %s on the destination once", keys, k)
		}
	}
}
