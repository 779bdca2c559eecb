package fencemigrate_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"loam.dev/router/kernel/fencing"
	"loam.dev/router/machine"
	"loam.dev/router/machine/fencemigrate"
	"loam.dev/router/machine/machinetest"
)

// TestScenarios replays testdata/*.txt, each also with the machine restored from its
// snapshot before every directive (see machinetest.Scripts): each verb feeds one input, and
// the output lists the commands returned and the spec events emitted.
func TestScenarios(t *testing.T) {
	machinetest.Scripts(t, "testdata", func() *harness { return &harness{rec: &machine.Recorder{}} })
}

type harness struct {
	m   *fencemigrate.Machine
	rec *machine.Recorder
	now int64
}

// Restore implements machinetest.Harness.
func (h *harness) Restore(t testing.TB) {
	if h.m != nil {
		h.m = machinetest.RoundTrip(t, h.m, func(s fencemigrate.Snapshot) (*fencemigrate.Machine, error) { return fencemigrate.Restore(s) })
	}
}

// Handle implements machinetest.Harness.
func (h *harness) Handle(t *testing.T, d *datadriven.TestData) string {
	arg := func(key string) string { return machinetest.Need[string](t, d, key) }
	var in fencemigrate.Input
	switch d.Cmd {
	case "config":
		var ttl int64
		d.ScanArgs(t, "ttl", &ttl)
		cfg := fencemigrate.Config{LeaseTTL: ttl}
		if machinetest.Arg(t, d, "mutant", "") == "M4" {
			cfg.Mutant = fencing.M4
		}
		h.m = fencemigrate.New(cfg)
		return "ok"
	case "tick":
		d.ScanArgs(t, "now", &h.now)
		return fmt.Sprintf("now=%d", h.now)
	case "report":
		var b strings.Builder
		for _, a := range d.CmdArgs {
			v, err := fencing.ParseVersion(a.Vals[0])
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString(h.feed(fencemigrate.PodReported{Pod: a.Key, Version: v}))
		}
		return b.String()
	case "gone":
		in = fencemigrate.PodGone{Pod: arg("pod")}
	case "advance":
		v, err := fencing.ParseVersion(arg("to"))
		if err != nil {
			t.Fatal(err)
		}
		in = fencemigrate.Advance{To: v}
	case "backfill":
		in = fencemigrate.StartBackfill{}
	case "backfill-done":
		var n int
		d.MaybeScanArgs(t, "sessions", &n)
		in = fencemigrate.BackfillDone{Step: arg("step"), Sessions: n, Err: machinetest.Err(d)}
	case "scanned":
		var n int
		d.MaybeScanArgs(t, "live", &n)
		in = fencemigrate.OldLeasesScanned{Step: arg("step"), Live: n, Err: machinetest.Err(d)}
	case "fire":
		in = fencemigrate.TimerFired{TimerFired: machine.TimerFired{ID: arg("id")}}
	case "request-enable":
		in = fencemigrate.RequestEnable{}
	case "confirm":
		in = fencemigrate.Confirm{Token: arg("token")}
	case "enabled":
		in = fencemigrate.ClusterEnabled{Step: arg("step"), Err: machinetest.Err(d)}
	case "state":
		s := h.m.Snapshot()
		var pods []string
		for _, p := range slices.Sorted(maps.Keys(s.Pods)) {
			pods = append(pods, p+"="+s.Pods[p].String())
		}
		return fmt.Sprintf("allowed=%s pods=(%s) backfilled=%v drained=%v enabled=%v",
			s.Allowed, strings.Join(pods, ","), s.Backfilled, s.Drained, s.Enabled)
	default:
		t.Fatalf("unknown verb %q", d.Cmd)
	}
	return h.feed(in)
}

func (h *harness) feed(in fencemigrate.Input) string {
	ctx := &machine.Ctx{Now: h.now, Trace: h.rec}
	var b strings.Builder
	for _, c := range h.m.On(ctx, in) {
		fmt.Fprintf(&b, "cmd  %s\n", formatCommand(c))
	}
	for _, e := range h.rec.Take() {
		fmt.Fprintf(&b, "spec %s\n", e)
	}
	return b.String()
}

func formatCommand(c fencemigrate.Command) string {
	switch c := c.(type) {
	case fencemigrate.AllowVersion:
		return fmt.Sprintf("AllowVersion step=%s version=%s", c.Step, c.Version)
	case fencemigrate.RunBackfill:
		return "RunBackfill step=" + c.Step
	case fencemigrate.SetTimer:
		return fmt.Sprintf("SetTimer id=%s at=%d", c.ID, c.At)
	case fencemigrate.ScanOldLeases:
		return "ScanOldLeases step=" + c.Step
	case fencemigrate.AskConfirmation:
		return fmt.Sprintf("AskConfirmation step=%s token=%s", c.Step, c.Token)
	case fencemigrate.EnableCluster:
		return "EnableCluster step=" + c.Step
	case fencemigrate.Refused:
		return fmt.Sprintf("Refused request=%q gate=%s detail=%q", c.Request, c.Gate, c.Detail)
	case fencemigrate.Alarm:
		return fmt.Sprintf("Alarm pod=%s detail=%q", c.Pod, c.Detail)
	}
	return fmt.Sprintf("%T%+v", c, c)
}
