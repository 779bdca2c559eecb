package failover_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"loam.dev/router/machine"
	"loam.dev/router/machine/failover"
)

// TestInteraction replays testdata/interaction/*.txt through the world model; regenerate
// with -rewrite and read the diff.
func TestInteraction(t *testing.T) {
	datadriven.Walk(t, "testdata/interaction", func(t *testing.T, path string) {
		h := &harness{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return h.handle(t, d)
		})
	})
}

type harness struct {
	m       *failover.Machine
	w       *world
	rec     *machine.Recorder
	now     int64
	rng     *rand.Rand
	pending []failover.Command
	timers  map[string]int64
	mutant  bool
	out     strings.Builder
}

func (h *harness) step(header string, in failover.Input) {
	cmds := h.m.On(&machine.Ctx{Now: h.now, Rand: h.rng, Trace: h.rec}, in)
	fmt.Fprintf(&h.out, "> %s\n", header)
	for _, e := range h.rec.Take() {
		fmt.Fprintf(&h.out, "  spec %s\n", e)
	}
	for _, c := range cmds {
		fmt.Fprintf(&h.out, "  cmd  %s\n", c)
		switch c := c.(type) {
		case failover.SetTimer:
			h.timers[c.ID] = c.At
		case failover.Done:
			h.w.checkEnd(c)
		case failover.Alert:
		default:
			h.pending = append(h.pending, c)
		}
	}
	for _, v := range h.w.violations {
		fmt.Fprintf(&h.out, "  !! violation: %s\n", v)
	}
	h.w.violations = nil
}

func (h *harness) handle(t *testing.T, d *datadriven.TestData) string {
	h.out.Reset()
	arg := func(k, def string) string {
		if d.HasArg(k) {
			d.ScanArgs(t, k, &def)
		}
		return def
	}
	switch d.Cmd {
	case "start":
		rec, shard, promoted := pgFixture()
		if arg("engine", "pgdog") == "vitess" {
			rec, shard, promoted = vtFixture()
		}
		opts := failover.Options{RetryAfter: 100, Attempts: 2}
		h.mutant = arg("mutant", "") == "skip-fence"
		opts.Mutants.SkipFence = h.mutant
		h.m, h.rec, h.now, h.rng = failover.New(), &machine.Recorder{}, 1000, rand.New(rand.NewPCG(1, 2))
		h.pending, h.timers = nil, map[string]int64{}
		if arg("same", "") == "true" {
			promoted = rec.Shards[1].Backend
		}
		h.w = newWorld(rec, shard, promoted, opts.Attempts)
		shard = arg("shard", shard)
		h.step("start", failover.Start{Record: rec, Shard: shard, Promoted: promoted, Role: "app", Options: opts})
	case "deliver":
		fail, applied, msg := arg("fail", ""), arg("applied", ""), arg("err", "unreachable")
		batch := h.pending
		h.pending = nil
		for _, c := range batch {
			step := stepOf(c)
			var err error
			header := "ok " + step
			if fail != "" && strings.Contains(step, fail) {
				err = errors.New(msg)
				header = "fail " + step + ": " + msg
			}
			h.step(header, h.w.apply(c, err, applied != "" && strings.Contains(step, applied)))
		}
	case "conflict":
		kind := arg("kind", "rebase")
		switch kind {
		case "rebase":
			h.w.foreignBump()
		case "gone":
			h.w.store.Version++
			h.w.store.Generation++
			for i := range h.w.store.Shards {
				if h.w.store.Shards[i].Name == h.w.shard {
					h.w.store.Shards[i].Name = "s9"
				}
			}
		}
		batch := h.pending
		h.pending = nil
		for _, c := range batch {
			h.step("conflict "+kind+" "+stepOf(c), h.w.apply(c, nil, false))
		}
	case "tick":
		var ms int64
		d.ScanArgs(t, "ms", &ms)
		h.now += ms
		for id, at := range h.timers {
			if at <= h.now {
				delete(h.timers, id)
				h.step("timer "+id, failover.TimerFired{ID: id})
			}
		}
	case "restart":
		apply := arg("apply", "")
		for _, c := range h.pending {
			if apply != "" && strings.Contains(stepOf(c), apply) {
				h.w.apply(c, nil, false)
			}
		}
		h.pending, h.timers = nil, map[string]int64{}
		b, err := json.Marshal(h.m.Snapshot())
		if err != nil {
			t.Fatal(err)
		}
		var s failover.Snapshot
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		if h.m, err = failover.Restore(s); err != nil {
			t.Fatal(err)
		}
		h.step("restart", failover.Restarted{})
	case "world":
		b, _ := backendOf(h.w.store, h.w.shard)
		fmt.Fprintf(&h.out, "store gen=%d version=%d %s=%s:%d fenced=%v reparented=%v pushed=%d\n",
			h.w.store.Generation, h.w.store.Version, h.w.shard, b.Host, b.Port, h.w.fenced, h.w.reparented, h.w.pushed)
	default:
		t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	}
	if !h.mutant && strings.Contains(h.out.String(), "!! violation") {
		t.Errorf("%s: invariant broken without a mutant:\n%s", d.Pos, h.out.String())
	}
	return h.out.String()
}
