package failover_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"loam.dev/router/machine/failover"
	"loam.dev/router/machine/machinetest"
)

// TestInteraction replays testdata/interaction/*.txt through the world model, each also
// with the machine restored from its snapshot before every directive (see
// machinetest.Scripts).
func TestInteraction(t *testing.T) {
	machinetest.Scripts(t, "testdata/interaction", func() *harness { return &harness{} })
}

type harness struct {
	machinetest.Run[failover.Command]
	m      *failover.Machine
	w      *world
	mutant bool
}

// Restore implements machinetest.Harness.
func (h *harness) Restore(t testing.TB) {
	if h.m != nil {
		h.m = machinetest.RoundTrip(t, h.m, failover.Restore)
	}
}

func (h *harness) step(header string, in failover.Input) {
	machinetest.Step(&h.Run, h.m, header, in, func(c failover.Command) bool {
		switch c := c.(type) {
		case failover.Done:
			h.w.checkEnd(c)
		case failover.Alert:
			h.w.alerts = append(h.w.alerts, c)
		default:
			return true
		}
		return false
	}, &h.w.violations)
}

// Handle implements machinetest.Harness.
func (h *harness) Handle(t *testing.T, d *datadriven.TestData) string {
	h.Out.Reset()
	arg := func(k, def string) string { return machinetest.Arg(t, d, k, def) }
	switch d.Cmd {
	case "start":
		rec, shard, promoted := pgFixture()
		if arg("engine", "pgdog") == "vitess" {
			rec, shard, promoted = vtFixture()
		}
		opts := failover.Options{RetryAfter: 100, Attempts: 2}
		h.mutant = arg("mutant", "") == "skip-fence"
		opts.Mutants.SkipFence = h.mutant
		h.m = failover.New()
		h.Begin(1000)
		if arg("same", "") == "true" {
			promoted = rec.Shards[1].Backend
		}
		h.w = newWorld(rec, shard, promoted, opts.Attempts)
		shard = arg("shard", shard)
		h.step("start", failover.Start{Record: rec, Shard: shard, Promoted: promoted, Role: "app", Options: opts})
	case "deliver":
		fail, applied, msg := arg("fail", ""), arg("applied", ""), arg("err", "unreachable")
		batch := h.Pending
		h.Pending = nil
		for _, c := range batch {
			step := stepOf(c)
			var err error
			header := "ok " + step
			if fail != "" && strings.Contains(step, fail) {
				err = errors.New(msg)
				header = "fail " + step + ": " + msg
			}
			if p := arg("refuse", ""); p != "" && strings.Contains(step, p) {
				h.w.wrongShard = true // vtctld refuses it for good (Reply.Permanent)
				header = "refuse " + step + ": " + errWrongShard.Error()
			}
			h.step(header, h.w.apply(c, err, applied != "" && strings.Contains(step, applied)))
		}
	case "conflict":
		kind := arg("kind", "rebase")
		switch kind {
		case "rebase":
			h.w.foreignBump()
		case "gone":
			h.w.removeShard()
		}
		batch := h.Pending
		h.Pending = nil
		for _, c := range batch {
			h.step("conflict "+kind+" "+stepOf(c), h.w.apply(c, nil, false))
		}
	case "tick":
		var ms int64
		d.ScanArgs(t, "ms", &ms)
		h.Now += ms
		for id, _, ok := h.Timers.Pop(h.Now); ok; id, _, ok = h.Timers.Pop(h.Now) {
			h.step("timer "+id, failover.TimerFired{ID: id})
		}
	case "restart":
		apply := arg("apply", "")
		for _, c := range h.Pending {
			if apply != "" && strings.Contains(stepOf(c), apply) {
				h.w.apply(c, nil, false)
			}
		}
		h.Pending, h.Timers = nil, machinetest.Timers{}
		h.Restore(t)
		h.step("restart", failover.Restarted{})
	case "world":
		b, _ := backendOf(h.w.store, h.w.shard)
		fmt.Fprintf(&h.Out, "store gen=%d version=%d %s=%s:%d fenced=%v reparented=%v pushed=%d\n",
			h.w.store.Generation, h.w.store.Version, h.w.shard, b.Host, b.Port, h.w.fenced, h.w.reparented, h.w.pushed)
	default:
		t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	}
	if !h.mutant && strings.Contains(h.Out.String(), "!! violation") {
		t.Errorf("%s: invariant broken without a mutant:\n%s", d.Pos, h.Out.String())
	}
	return h.Out.String()
}
