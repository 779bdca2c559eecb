package fencemigrate_test

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"loam.dev/router/kernel/fencing"
	"loam.dev/router/machine"
	"loam.dev/router/machine/fencemigrate"
)

// TestScenarios replays testdata/*.txt: each verb feeds one input, and the output lists the
// commands returned and the spec events emitted. Regenerate with -rewrite after reading the
// diff.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			h := &harness{rec: &machine.Recorder{}}
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				return h.run(t, d)
			})
		})
	}
}

type harness struct {
	m   *fencemigrate.Machine
	rec *machine.Recorder
	now int64
}

func arg(t *testing.T, d *datadriven.TestData, key string) string {
	var v string
	d.ScanArgs(t, key, &v)
	return v
}

func optErr(t *testing.T, d *datadriven.TestData) error {
	if d.HasArg("err") {
		return errors.New(arg(t, d, "err"))
	}
	return nil
}

func (h *harness) run(t *testing.T, d *datadriven.TestData) string {
	var in fencemigrate.Input
	switch d.Cmd {
	case "config":
		var ttl int64
		d.ScanArgs(t, "ttl", &ttl)
		cfg := fencemigrate.Config{LeaseTTL: ttl}
		if d.HasArg("mutant") && arg(t, d, "mutant") == "M4" {
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
		in = fencemigrate.PodGone{Pod: arg(t, d, "pod")}
	case "advance":
		v, err := fencing.ParseVersion(arg(t, d, "to"))
		if err != nil {
			t.Fatal(err)
		}
		in = fencemigrate.Advance{To: v}
	case "backfill":
		in = fencemigrate.StartBackfill{}
	case "backfill-done":
		var n int
		d.MaybeScanArgs(t, "sessions", &n)
		in = fencemigrate.BackfillDone{Step: arg(t, d, "step"), Sessions: n, Err: optErr(t, d)}
	case "scanned":
		var n int
		d.MaybeScanArgs(t, "live", &n)
		in = fencemigrate.OldLeasesScanned{Step: arg(t, d, "step"), Live: n, Err: optErr(t, d)}
	case "fire":
		in = fencemigrate.TimerFired{TimerFired: machine.TimerFired{ID: arg(t, d, "id")}}
	case "request-enable":
		in = fencemigrate.RequestEnable{}
	case "confirm":
		in = fencemigrate.Confirm{Token: arg(t, d, "token")}
	case "enabled":
		in = fencemigrate.ClusterEnabled{Step: arg(t, d, "step"), Err: optErr(t, d)}
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
