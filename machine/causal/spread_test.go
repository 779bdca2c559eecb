package causal_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/lsn"
	"loam.dev/router/machine"
	"loam.dev/router/machine/causal"
)

// TestRoutesSpreadOverMembers: ordinary and causal routes are drawn in random order from
// ctx.Rand, so every member is tried first by some request: a selector that always tried
// the configured order first would send every read to one replica (found by make mutate:
// the shuffle's guard negated kept every property green).
func TestRoutesSpreadOverMembers(t *testing.T) {
	p := lsn.Endpoint{Host: "primary", Port: 5432}
	reps := []lsn.Endpoint{{Host: "r1", Port: 5432}, {Host: "r2", Port: 5432}, {Host: "r3", Port: 5432}}
	m := causal.New(causal.Config{})
	ctx := &machine.Ctx{Now: 10, Rand: rand.New(rand.NewPCG(1, 2))}
	m.On(ctx, causal.SetHostgroup{Hostgroup: 0, Endpoints: []lsn.Endpoint{p}})
	m.On(ctx, causal.SetHostgroup{Hostgroup: 1, Endpoints: reps})
	m.On(ctx, causal.Executed{Frontend: "f", Hostgroup: 0, Endpoint: p})
	ctx.Now = 20
	m.On(ctx, causal.Sampled{Endpoint: p, Sample: lsn.Observed(11, 100)})
	for _, r := range reps {
		m.On(ctx, causal.Sampled{Endpoint: r, Sample: lsn.Observed(12, 100)})
	}
	first := map[string]map[lsn.Endpoint]int{"ordinary": {}, "causal": {}}
	for id := range uint64(200) {
		var in causal.Input = causal.Acquire{ID: id, Frontend: "f", Hostgroup: 1}
		kind := "ordinary"
		if id%2 == 1 {
			in, kind = causal.AcquireCausal{ID: id, Frontend: "f", Hostgroup: 1, From: 0, Deadline: 1000}, "causal"
		}
		cmds := m.On(ctx, in)
		require.Len(t, cmds, 1)
		r, ok := cmds[0].(causal.Route)
		require.True(t, ok, "%T", cmds[0])
		require.ElementsMatch(t, reps, r.Endpoints)
		first[kind][r.Endpoints[0]]++
	}
	for kind, n := range first {
		require.Len(t, n, len(reps), "%s routes: every member must come first for some request: %v", kind, n)
	}
}

// TestWaitErrorSaysHowLongItWaited: an expired causal request's error reports the wait from
// its arrival to its deadline, and whether its requirement was still unknown (found by make
// mutate: Waited computed as a sum kept every property green).
func TestWaitErrorSaysHowLongItWaited(t *testing.T) {
	p, r := lsn.Endpoint{Host: "primary", Port: 5432}, lsn.Endpoint{Host: "r1", Port: 5432}
	m := causal.New(causal.Config{})
	ctx := &machine.Ctx{Now: 1000}
	m.On(ctx, causal.SetHostgroup{Hostgroup: 0, Endpoints: []lsn.Endpoint{p}})
	m.On(ctx, causal.SetHostgroup{Hostgroup: 1, Endpoints: []lsn.Endpoint{r}})
	m.On(ctx, causal.Executed{Frontend: "f", Hostgroup: 0, Endpoint: p})
	ctx.Now = 1200
	cmds := m.On(ctx, causal.AcquireCausal{ID: 7, Frontend: "f", Hostgroup: 1, From: 0, Deadline: 1500})
	require.Len(t, cmds, 1)
	st, ok := cmds[0].(causal.SetTimer)
	require.True(t, ok, "%T", cmds[0])
	ctx.Now = st.At
	cmds = m.On(ctx, causal.TimerFired{ID: st.ID})
	require.Len(t, cmds, 1)
	f, ok := cmds[0].(causal.Fail)
	require.True(t, ok, "%T", cmds[0])
	var we *causal.WaitError
	require.True(t, errors.As(f.Err, &we))
	require.Equal(t, int64(300), we.Waited)
	require.False(t, we.Resolved)
	require.Equal(t, int64(1000), we.Completed)
	require.ErrorIs(t, f.Err, causal.ErrNotReached)
}

// TestMembershipChangeWakesWaiters: a causal request waiting because no member has reached
// its requirement is routed as soon as SetHostgroup adds one that has, and a change to
// another hostgroup leaves it waiting (found by make mutate: only a golden script reached
// the wake on a membership change).
func TestMembershipChangeWakesWaiters(t *testing.T) {
	p := lsn.Endpoint{Host: "primary", Port: 5432}
	slow, fast := lsn.Endpoint{Host: "r1", Port: 5432}, lsn.Endpoint{Host: "r2", Port: 5432}
	m := causal.New(causal.Config{})
	ctx := &machine.Ctx{Now: 10}
	m.On(ctx, causal.SetHostgroup{Hostgroup: 0, Endpoints: []lsn.Endpoint{p}})
	m.On(ctx, causal.SetHostgroup{Hostgroup: 1, Endpoints: []lsn.Endpoint{slow}})
	m.On(ctx, causal.Executed{Frontend: "f", Hostgroup: 0, Endpoint: p})
	ctx.Now = 20
	m.On(ctx, causal.Sampled{Endpoint: p, Sample: lsn.Observed(11, 100)})
	m.On(ctx, causal.Sampled{Endpoint: slow, Sample: lsn.Observed(12, 50)})
	m.On(ctx, causal.Sampled{Endpoint: fast, Sample: lsn.Observed(12, 100)})
	cmds := m.On(ctx, causal.AcquireCausal{ID: 1, Frontend: "f", Hostgroup: 1, From: 0, Deadline: 1000})
	require.Len(t, cmds, 1)
	require.IsType(t, causal.SetTimer{}, cmds[0])
	require.Empty(t, m.On(ctx, causal.SetHostgroup{Hostgroup: 2, Endpoints: []lsn.Endpoint{fast}}), "another hostgroup's change routes nothing")
	require.Equal(t, 1, m.Waiting())
	cmds = m.On(ctx, causal.SetHostgroup{Hostgroup: 1, Endpoints: []lsn.Endpoint{slow, fast}})
	require.Len(t, cmds, 2)
	require.IsType(t, causal.CancelTimer{}, cmds[0])
	r, ok := cmds[1].(causal.Route)
	require.True(t, ok, "%T", cmds[1])
	require.Equal(t, []lsn.Endpoint{fast}, r.Endpoints)
	require.Zero(t, m.Waiting())
}
