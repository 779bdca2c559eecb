package causal_test

import (
	"go/parser"
	"go/token"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/lsn"
	"loam.dev/router/machine"
	"loam.dev/router/machine/causal"
)

// TestActionsMatchDoc: the action list in the package doc is exactly the set the machine
// emits, and every one is emitted by some scenario or run (no action without an emitter).
func TestActionsMatchDoc(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	require.NoError(t, err)
	m := regexp.MustCompile(`Spec: CausalRead\. Actions: ([A-Za-z, ]+)\.`).FindStringSubmatch(f.Doc.Text())
	require.NotNil(t, m, "doc.go must say `Spec: CausalRead. Actions: ...`")
	require.Equal(t, causal.Actions, strings.Split(m[1], ", "))

	src, err := os.ReadFile("machine.go")
	require.NoError(t, err)
	for _, a := range causal.Actions {
		name := "Act" + a
		require.Contains(t, string(src), "Emit(Spec, "+name, "no emitter for action %s", a)
	}
	emitted := map[string]bool{}
	rec := &machine.Recorder{}
	ctx := &machine.Ctx{Now: 1, Trace: rec}
	run := newEnv()
	run.ctx = ctx
	for _, st := range scenarioSmoke() {
		ctx.Now = st.at
		run.on(st.in)
	}
	for _, ev := range rec.Events {
		require.Equal(t, causal.Spec, ev.Spec)
		require.Contains(t, causal.Actions, ev.Action)
		emitted[ev.Action] = true
		// Every event encodes as a canonical trace line.
		_, err := machine.AppendJSON(nil, ev)
		require.NoError(t, err)
	}
	for _, a := range causal.Actions {
		require.True(t, emitted[a], "action %s never emitted by the smoke scenario", a)
	}
}

type step struct {
	at int64
	in causal.Input
}

// scenarioSmoke drives every transition once.
func scenarioSmoke() []step {
	p, s := lsn.Endpoint{Host: "p", Port: 1}, lsn.Endpoint{Host: "s", Port: 1}
	return []step{
		{1, causal.SetHostgroup{Hostgroup: 1, Endpoints: []lsn.Endpoint{p}}},
		{1, causal.SetHostgroup{Hostgroup: 2, Endpoints: []lsn.Endpoint{s}}},
		{2, causal.Executed{Frontend: "f", Hostgroup: 1, Endpoint: p}},
		{3, causal.AcquireCausal{ID: 1, Frontend: "f", Hostgroup: 2, From: 1, Deadline: 100}},  // pending
		{10, causal.Sampled{Endpoint: p, Sample: lsn.Observed(10, 5)}},                         // resolves 1
		{11, causal.Sampled{Endpoint: s, Sample: lsn.Observed(11, 5)}},                         // routes 1
		{12, causal.AcquireCausal{ID: 2, Frontend: "f", Hostgroup: 2, From: 1, Deadline: 100}}, // routes at once
		{13, causal.Executed{Frontend: "f", Hostgroup: 1, Endpoint: p}},
		{20, causal.Sampled{Endpoint: p, Sample: lsn.Observed(20, 9)}},
		{21, causal.AcquireCausal{ID: 3, Frontend: "f", Hostgroup: 2, From: 1, Deadline: 30}}, // waits
		{30, causal.TimerFired{ID: "causal/3"}},                                               // expires
		{31, causal.AcquireCausal{ID: 4, Frontend: "f", Hostgroup: 2, From: 1, Deadline: 100}},
		{32, causal.Cancel{ID: 4}},
		{33, causal.Acquire{ID: 5, Frontend: "g", Hostgroup: 2}},
		{34, causal.AcquireCausal{ID: 6, Frontend: "f", Hostgroup: 2, From: 1, Deadline: 100}},
		{35, causal.Disconnected{Frontend: "f"}},
	}
}

// TestSnapshotRestore: a restored snapshot answers every later input exactly as the original,
// and later inputs to either do not leak into the snapshot.
func TestSnapshotRestore(t *testing.T) {
	a := causal.New(causal.Config{Window: 100})
	steps := scenarioSmoke()
	ctxA := &machine.Ctx{Rand: rand.New(rand.NewPCG(3, 4))}
	half := 4 // after request 1 started waiting
	for _, st := range steps[:half] {
		ctxA.Now = st.at
		a.On(ctxA, st.in)
	}
	snap := a.Snapshot()
	b := causal.Restore(snap)
	ctxB := &machine.Ctx{Rand: rand.New(rand.NewPCG(3, 4))}
	ctxA.Rand = rand.New(rand.NewPCG(3, 4))
	for _, st := range steps[half:] {
		ctxA.Now, ctxB.Now = st.at, st.at
		require.Equal(t, a.On(ctxA, st.in), b.On(ctxB, st.in), "%T at %d", st.in, st.at)
	}
	require.Equal(t, a.Rows(), b.Rows())
	fresh := causal.Restore(snap)
	require.Equal(t, 1, fresh.Waiting(), "the snapshot still has request 1 waiting")
	require.Empty(t, fresh.Rows(), "samples fed after the snapshot are not in it")
	require.Zero(t, a.Waiting())
}

func TestOutOfOrderSampleIsDropped(t *testing.T) {
	m := causal.New(causal.Config{})
	ctx := &machine.Ctx{}
	ep := lsn.Endpoint{Host: "p", Port: 1}
	m.On(ctx, causal.Sampled{Endpoint: ep, Sample: lsn.Observed(10, 5)})
	m.On(ctx, causal.Sampled{Endpoint: ep, Sample: lsn.Observed(10, 9)})
	require.Equal(t, 1, m.RejectedSamples())
	require.Equal(t, []lsn.Row{{Endpoint: ep, LSN: 5, Known: true}}, m.Rows())
	require.Positive(t, m.Footprint())
	require.Nil(t, m.On(ctx, causal.TimerFired{ID: "someone-else/1"}))
	require.Nil(t, m.On(ctx, causal.Cancel{ID: 42}))
}

func TestDuplicateRequestID(t *testing.T) {
	m := causal.New(causal.Config{})
	ctx := &machine.Ctx{}
	p, s := lsn.Endpoint{Host: "p", Port: 1}, lsn.Endpoint{Host: "s", Port: 1}
	m.On(ctx, causal.SetHostgroup{Hostgroup: 2, Endpoints: []lsn.Endpoint{s}})
	m.On(ctx, causal.Executed{Frontend: "f", Hostgroup: 1, Endpoint: p})
	cmds := m.On(ctx, causal.AcquireCausal{ID: 7, Frontend: "f", Hostgroup: 2, From: 1, Deadline: 10})
	require.IsType(t, causal.SetTimer{}, cmds[0])
	cmds = m.On(ctx, causal.AcquireCausal{ID: 7, Frontend: "f", Hostgroup: 2, From: 1, Deadline: 10})
	require.Len(t, cmds, 1)
	require.ErrorIs(t, cmds[0].(causal.Fail).Err, causal.ErrDuplicateRequest)
	require.Equal(t, 1, m.Waiting())
	ctx.Now = 10
	cmds = m.On(ctx, causal.TimerFired{ID: "causal/7"})
	var we *causal.WaitError
	require.ErrorAs(t, cmds[0].(causal.Fail).Err, &we)
	require.False(t, we.Resolved)
	require.Equal(t, p, we.Source)
	require.Equal(t, int64(10), we.Waited)
}

// TestStuckPeerWholeWindow: a standby stuck for twice the default window, polled every 10 ms
// while causal requests keep arriving, holds at most two samples.
func TestStuckPeerWholeWindow(t *testing.T) {
	m := causal.New(causal.Config{})
	ctx := &machine.Ctx{}
	p, s := lsn.Endpoint{Host: "p", Port: 1}, lsn.Endpoint{Host: "s", Port: 1}
	m.On(ctx, causal.SetHostgroup{Hostgroup: 2, Endpoints: []lsn.Endpoint{s}})
	var id uint64
	peak := 0
	for ctx.Now = 0; ctx.Now < 2*lsn.DefaultWindow; ctx.Now += 10 {
		m.On(ctx, causal.Sampled{Endpoint: p, Sample: lsn.Observed(ctx.Now, lsn.LSN(ctx.Now))})
		m.On(ctx, causal.Sampled{Endpoint: s, Sample: lsn.Observed(ctx.Now, 7)})
		if ctx.Now%1000 == 0 {
			id++
			m.On(ctx, causal.Executed{Frontend: "f", Hostgroup: 1, Endpoint: p})
			m.On(ctx, causal.AcquireCausal{ID: id, Frontend: "f", Hostgroup: 2, From: 1, Deadline: ctx.Now + 5})
			m.On(ctx, causal.TimerFired{ID: "causal/" + strconv.FormatUint(id, 10)})
		}
		require.LessOrEqual(t, m.History(s).Len(), 2)
		peak = max(peak, m.History(s).Footprint())
	}
	require.LessOrEqual(t, peak, 72+16*(4*2+16))
	require.Equal(t, 6002, m.History(p).Len(), "steady progress: one sample per poll in the window (6001, both ends included) plus the anchor")
	require.True(t, slices.ContainsFunc(m.Rows(), func(r lsn.Row) bool { return r.Endpoint == s && r.LSN == 7 }))
}
