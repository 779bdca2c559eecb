//go:build !loam_mutant_indoubt_commit

// (Under the commit mutant the transcripts differ: that build runs TestMutantCommitIsCaught.)

package indoubt_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	"loam.dev/router/machine"
	"loam.dev/router/machine/indoubt"
	"loam.dev/router/machine/machinetest"
)

// TestInteraction replays the scenario files under testdata/, each also with the monitor
// restored from its snapshot before every directive (see machinetest.Scripts).
func TestInteraction(t *testing.T) {
	machinetest.Scripts(t, "testdata", func() *env {
		e := &env{}
		e.reset(indoubt.Options{})
		return e
	})
}

type env struct {
	opts   indoubt.Options
	m      *indoubt.Monitor
	now    int64
	timers machinetest.Timers
}

func (e *env) reset(opts indoubt.Options) {
	e.opts, e.m, e.now, e.timers = opts, indoubt.New(opts), 1000, machinetest.Timers{}
}

// Restore implements machinetest.Harness.
func (e *env) Restore(t testing.TB) {
	e.m = machinetest.RoundTrip(t, e.m, func(s indoubt.Snapshot) (*indoubt.Monitor, error) { return indoubt.Restore(s, e.opts) })
}

// Handle implements machinetest.Harness.
func (e *env) Handle(t *testing.T, d *datadriven.TestData) string {
	if d.Cmd == "options" {
		e.reset(indoubt.Options{
			Period:     time.Duration(machinetest.Arg[int64](t, d, "period", 0)) * time.Millisecond,
			Threshold:  time.Duration(machinetest.Arg[int64](t, d, "threshold", 0)) * time.Millisecond,
			Deployment: machinetest.Arg(t, d, "deployment", ""),
			BlindAfter: int(machinetest.Arg[int64](t, d, "blind-after", 0)),
			StuckAfter: time.Duration(machinetest.Arg[int64](t, d, "stuck-after", 0)) * time.Millisecond,
		})
		return "ok"
	}
	e.now += machinetest.Arg[int64](t, d, "advance", 0)
	round := "r" + strconv.FormatUint(e.m.Snapshot().Round, 10)
	if d.HasArg("round") {
		round = "r" + strconv.FormatInt(machinetest.Arg[int64](t, d, "round", 0), 10)
	}
	var in indoubt.Input
	switch d.Cmd {
	case "track":
		in = indoubt.Track{Shards: machinetest.Vals(d, "shards")}
	case "prepared":
		// prepared shard=s0 xacts=(gid@preparedms,...) [err=(...)]
		shard := machinetest.Arg(t, d, "shard", "")
		p := indoubt.Prepared{Step: round + "/prepared/" + shard, Shard: shard, Err: machinetest.Err(d)}
		for _, v := range machinetest.Vals(d, "xacts") {
			gid, at, _ := strings.Cut(v, "@")
			n, err := strconv.ParseInt(at, 10, 64)
			require.NoError(t, err, "xact %q: want gid@ms", v)
			p.Xacts = append(p.Xacts, indoubt.Xact{GID: gid, Prepared: n, Owner: "app", Database: "app"})
		}
		in = p
	case "roster":
		// roster procs=(id@startedms,...) [err=(...)]
		r := indoubt.Roster{Step: round + "/roster", Err: machinetest.Err(d)}
		for _, v := range machinetest.Vals(d, "procs") {
			id, at, _ := strings.Cut(v, "@")
			n, _ := strconv.ParseInt(at, 10, 64)
			r.Processes = append(r.Processes, indoubt.Process{ID: id, Started: n})
		}
		in = r
	case "delivered":
		// delivered id=<alert> [clear] [round=N] [err=(...)]: the sink's answer to the
		// delivery decided in round N (default: the current one).
		kind := "alert/"
		if d.HasArg("clear") {
			kind = "clear/"
		}
		in = indoubt.Delivered{Step: round + "/" + kind + machinetest.Arg(t, d, "id", ""), Err: machinetest.Err(d)}
	case "fire":
		at, ok := e.timers.Take(indoubt.RoundTimer)
		if !ok {
			d.Fatalf(t, "no round timer is pending")
		}
		e.now = max(e.now, at)
		in = indoubt.TimerFired{ID: indoubt.RoundTimer}
	case "restart":
		e.Restore(t)
		e.timers = machinetest.Timers{}
		in = indoubt.Restarted{}
	case "alerts":
		var b strings.Builder
		for _, a := range e.m.Snapshot().Alerts {
			fmt.Fprintln(&b, a)
		}
		return b.String() + "."
	default:
		d.Fatalf(t, "unknown directive %q", d.Cmd)
	}
	rec := &machine.Recorder{}
	cmds := e.m.On(&machine.Ctx{Now: e.now, Trace: rec}, in)
	var b strings.Builder
	for _, c := range cmds {
		e.timers.Record(c)
		fmt.Fprintf(&b, "cmd %v\n", c)
	}
	for _, ev := range rec.Take() {
		fmt.Fprintf(&b, "spec %v\n", ev)
	}
	if b.Len() == 0 {
		return "(nothing)"
	}
	return b.String()
}

// TestScenariosCoverEveryAction: every action the machine can emit appears in some
// scenario, and no scenario shows an action the machine does not declare.
func TestScenariosCoverEveryAction(t *testing.T) {
	require.ElementsMatch(t, indoubt.Actions, machinetest.ScriptActions(t, os.DirFS("testdata"), indoubt.Spec))
}
