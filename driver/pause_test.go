package driver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/memstore"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/cutover"
)

// slowBlobs is a blob store whose every write takes delay: an fsync on a loaded disk.
type slowBlobs struct {
	*memstore.Store
	delay time.Duration
}

func (s slowBlobs) PutBlob(ctx context.Context, key string, expect uint64, data []byte) (uint64, error) {
	time.Sleep(s.delay)
	return s.Store.PutBlob(ctx, key, expect, data)
}

// PutBlobs writes a batch in one transaction, taking delay once: one fsync.
func (s slowBlobs) PutBlobs(ctx context.Context, puts []adapters.BlobPut) ([]uint64, error) {
	time.Sleep(s.delay)
	return s.Store.PutBlobs(ctx, puts)
}

// slowShard is a shard whose fence takes delay: the time Postgres takes.
type slowShard struct {
	shard
	delay time.Duration
}

func (s slowShard) FenceWrites(ctx context.Context, role string) error {
	time.Sleep(s.delay)
	return s.shard.FenceWrites(ctx, role)
}

// TestCutoverPauseBreakdown: a cutover through the driver and an Audited executor sharing
// one Timeline, on a store whose writes (one blob, or a batch in one transaction) take 5ms
// and shards whose fence takes 30ms. CutoverPause puts the fence's time in the commands,
// the slow snapshot saves (each holding its step's exec entries) in the controller's share,
// and every instant of the window in exactly one place.
func TestCutoverPauseBreakdown(t *testing.T) {
	const saveDelay, fenceDelay = 5 * time.Millisecond, 30 * time.Millisecond
	s := newCutoverSetup(t)
	blobs := slowBlobs{memstore.New(), saveDelay}
	backends := map[string]adapters.ShardBackend{}
	rec := s.start.Record
	for _, sh := range append(append([]shardmap.Shard(nil), rec.Shards...), rec.Target.Shards...) {
		k := driver.BackendKey(sh.Backend)
		backends[k] = slowShard{shard{k, s.fleet}, fenceDelay}
	}
	s.exec.Backend = driver.Lookup(backends)
	tl := &driver.Timeline{}
	tok := driver.Token{Holder: "test", Epoch: 1}
	audited := &driver.Audited[cutover.Input, cutover.Command]{Kind: "cutover", ID: "ns/app", Next: s.exec,
		Audit: driver.NewAudit(blobs, func() driver.Token { return tok }, quiet), Timeline: tl}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, driver.Run(ctx, driver.Cutover(audited),
		driver.Config[cutover.Input]{ID: "ns/app", Store: blobs, Logger: quiet, Trace: machine.Discard, Timeline: tl}, cutover.Input(s.start)))
	require.Equal(t, cutover.Finalized, (<-s.done).Outcome)

	rep, ok := driver.CutoverPause(tl.Spans())
	require.True(t, ok, "the run paused and resumed")
	var stages []string
	for _, st := range rep.Steps {
		stages = append(stages, st.Stage)
	}
	require.Equal(t, []string{"pause", "fence", "cutover", "resolve", "repause", "publish", "open", "files", "reload", "resume"}, stages)
	require.Equal(t, rep.Window, rep.Commands+rep.Controller)
	sum := func(c driver.PauseCosts) time.Duration { return c.Audit + c.Save + c.Wait + c.Feed + c.Other }
	require.Equal(t, rep.Controller, sum(rep.Costs))
	require.GreaterOrEqual(t, rep.Costs.Other, time.Duration(0), "no instant counted twice")
	var wall time.Duration
	for _, st := range rep.Steps {
		require.GreaterOrEqual(t, st.Costs.Other, time.Duration(0), "%s: no instant counted twice", st.Stage)
		require.Equal(t, st.Wall, st.Busy+sum(st.Costs), st.Stage)
		require.NotEmpty(t, st.Commands, st.Stage)
		wall += st.Wall
		for _, c := range st.Commands {
			// The step's exec entries are written at once before its commands start: no
			// command waits on an audit write of its own.
			require.Zero(t, c.Audit, "%s: no audit write inside the command", c.Step)
		}
	}
	require.Equal(t, rep.Window, wall, "the steps tile the window")
	fence := rep.Steps[1]
	require.Len(t, fence.Commands, 6, "both layouts' shards")
	require.GreaterOrEqual(t, fence.Busy, fenceDelay, "the fence's Postgres time is the commands'")
	for _, c := range fence.Commands {
		require.GreaterOrEqual(t, c.Wall-c.Audit, fenceDelay, c.Target)
	}
	// Every step saves before its commands, and its exec entries in the same write: ten
	// steps, at least one save each (the one before the first Pause is outside the window),
	// whatever its number of commands, and no audit write of exec entries of its own.
	require.GreaterOrEqual(t, rep.Costs.Save, 9*saveDelay)
	var stepWrites, cmds int
	for _, sp := range spansOf(tl, driver.SpanSave) {
		if sp.What == "snapshot and audit entries" && !sp.Start.Before(rep.Start) && sp.Start.Before(rep.Start.Add(rep.Window)) {
			stepWrites++
		}
	}
	for _, sp := range spansOf(tl, driver.SpanAudit) {
		require.False(t, strings.HasPrefix(sp.What, driver.AuditExec+" "), "exec entries written alone: %s", sp.What)
	}
	for _, st := range rep.Steps {
		cmds += len(st.Commands)
	}
	require.GreaterOrEqual(t, stepWrites, len(rep.Steps)-1, "every step in the window wrote its exec entries with its snapshot (the first before the window opened)")
	require.Less(t, stepWrites, cmds, "one exec write per step, not one per command")
	// Every command's result entry was written too (with the snapshot of the step that fed
	// its reply, or off its path for a report), before Run returned.
	entries, err := driver.ReadAudit(ctx, blobs, driver.AuditFilter{})
	require.NoError(t, err)
	execs, results := map[string]bool{}, map[string]bool{}
	for _, sp := range spansOf(tl, driver.SpanExec) {
		execs[sp.Step] = true
	}
	for _, e := range entries {
		if e.Event == driver.AuditResult || e.Event == driver.AuditReport {
			results[e.Step] = true
		}
	}
	require.Equal(t, execs, results, "a result (or report) entry for every command executed")
	require.Len(t, entries, 2*len(spansOf(tl, driver.SpanExec)), "an exec and a result entry per command, all written when Run returned")
	require.Less(t, fence.Busy, fence.Wall, "the fence step's audit writes and save are not counted as the fence's")
	t.Log(rep)

	// The audit log alone (what `cutover status` reads once the run is over) gives the same
	// pause: the same steps and commands, each inside the span the Timeline measured around
	// it (Run times the executor's whole call, Audited only the command's own; the log's
	// durations are whole microseconds).
	fromLog, ok := driver.PauseFromAudit(entries)
	require.True(t, ok, "the audit log holds the pause")
	t.Log(fromLog)
	const us = time.Microsecond
	inside := func(what string, a0, a1, b0, b1 time.Time) {
		require.False(t, a0.Before(b0.Add(-us)) || a1.After(b1.Add(us)), "%s: the log's [%v, %v] inside the Timeline's [%v, %v]", what, a0, a1, b0, b1)
	}
	inside("the window", fromLog.Start, fromLog.Start.Add(fromLog.Window), rep.Start, rep.Start.Add(rep.Window))
	require.Len(t, fromLog.Steps, len(rep.Steps))
	for i, st := range rep.Steps {
		ls := fromLog.Steps[i]
		require.Equal(t, st.Stage, ls.Stage)
		byStep := map[string]driver.PauseCommand{}
		for _, lc := range ls.Commands {
			byStep[lc.Step] = lc // one attempt each here
		}
		require.Len(t, byStep, len(st.Commands), st.Stage)
		for _, c := range st.Commands {
			lc, ok := byStep[c.Step]
			require.True(t, ok, c.Step)
			require.Equal(t, c.Target, lc.Target, c.Step)
			require.Equal(t, c.Result, lc.Result, c.Step)
			start, lstart := rep.Start.Add(c.Offset), fromLog.Start.Add(lc.Offset)
			inside(c.Step, lstart, lstart.Add(lc.Wall), start, start.Add(c.Wall))
		}
	}
	require.GreaterOrEqual(t, fromLog.Costs.Audit, saveDelay, "the exec writes (with the saves), from their keys' times")
	require.Equal(t, fromLog.Window, fromLog.Commands+fromLog.Controller)
}

func spansOf(tl *driver.Timeline, k driver.SpanKind) []driver.Span {
	var out []driver.Span
	for _, s := range tl.Spans() {
		if s.Kind == k {
			out = append(out, s)
		}
	}
	return out
}
