package vreshard_test

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"loam.dev/router/detsim/check"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine/machinetest"
	"loam.dev/router/machine/vreshard"
)

// TestInteraction replays testdata/interaction/*.txt through the world, each also with the
// machine restored from its snapshot before every directive (machinetest.Scripts).
func TestInteraction(t *testing.T) {
	machinetest.Scripts(t, "testdata/interaction", func() *harness { return &harness{} })
}

type harness struct {
	machinetest.Run[vreshard.Command]
	m *vreshard.Machine
	w *world
}

func (h *harness) Restore(t testing.TB) {
	if h.m != nil {
		h.m = machinetest.RoundTrip(t, h.m, vreshard.Restore)
	}
}

func (h *harness) step(header string, in vreshard.Input) {
	machinetest.Step(&h.Run, h.m, header, in, func(c vreshard.Command) bool {
		switch c := c.(type) {
		case vreshard.Done:
			h.w.checkEnd(c)
		case vreshard.Alert:
		default:
			return true
		}
		return false
	}, &h.w.violations)
}

// timer fires id; finalize_after's timer is the hold ending as a Finalize would.
func (h *harness) timer(id string) {
	if strings.HasPrefix(id, "finalize:") {
		h.w.finalized = true
	}
	h.step("timer "+id, vreshard.TimerFired{ID: id})
}

func (h *harness) Handle(t *testing.T, d *datadriven.TestData) string {
	h.Out.Reset()
	arg := func(k, def string) string { return machinetest.Arg(t, d, k, def) }
	switch d.Cmd {
	case "start":
		st := fixture()
		h.m = vreshard.New()
		h.Begin(1000)
		h.w = newWorld(st.Record)
		h.w.mismatch, h.w.verifyFail = arg("mismatch", "") == "true", arg("verify", "") == "fail"
		h.w.copyPolls = machinetest.Arg(t, d, "copying", 1)
		h.w.backlog, h.w.drain = machinetest.Arg(t, d, "backlog", int64(0)), machinetest.Arg(t, d, "drain", int64(0))
		h.w.now = func() int64 { return h.Now }
		st.Options.FinalizeAfter = machinetest.Arg(t, d, "finalize_after", int64(0))
		if tg := arg("target", ""); tg != "" {
			st.Target = strings.Split(tg, ",")
			for i, n := range st.Target {
				st.Backends[n] = shardmap.Backend{Host: "10.0.5." + strconv.Itoa(i+1), Port: 3306, Database: "vt_customer"}
			}
		}
		h.step("start", st)
	case "deliver":
		// Answers the pending commands in order; n=<k> answers only the first k.
		fail, applied, msg := arg("fail", ""), arg("applied", ""), arg("err", "unreachable")
		n := machinetest.Arg(t, d, "n", len(h.Pending))
		for i := 0; i < n && len(h.Pending) > 0; i++ {
			c := h.Pending[0]
			h.Pending = h.Pending[1:]
			step := stepOf(c)
			var err error
			header := "ok " + step
			if fail != "" && strings.Contains(step, fail) {
				err, header = errors.New(msg), "fail "+step+": "+msg
			}
			h.step(header, h.w.apply(c, err, applied != "" && strings.Contains(step, applied)))
		}
	case "run":
		// Answers and fires timers until nothing is left or the machine is done.
		for i := 0; i < 200 && (len(h.Pending) > 0 || len(h.Timers) > 0); i++ {
			if len(h.Pending) > 0 {
				c := h.Pending[0]
				h.Pending = h.Pending[1:]
				h.step("ok "+stepOf(c), h.w.apply(c, nil, false))
				continue
			}
			for _, at := range h.Timers {
				h.Now = max(h.Now, at)
			}
			for id, _, ok := h.Timers.Pop(h.Now); ok; id, _, ok = h.Timers.Pop(h.Now) {
				h.timer(id)
			}
		}
	case "tick":
		var ms int64
		d.ScanArgs(t, "ms", &ms)
		h.Now += ms
		for id, _, ok := h.Timers.Pop(h.Now); ok; id, _, ok = h.Timers.Pop(h.Now) {
			h.timer(id)
		}
	case "cancel":
		h.step("cancel", vreshard.CancelRequest{})
	case "finalize":
		h.w.finalized = true
		h.step("finalize", vreshard.Finalize{})
	case "restart":
		apply := arg("apply", "")
		for _, c := range h.Pending {
			if apply != "" && strings.Contains(stepOf(c), apply) {
				h.w.apply(c, nil, false)
			}
		}
		h.Pending, h.Timers = nil, machinetest.Timers{}
		h.Restore(t)
		h.step("restart", vreshard.Restarted{})
	case "world":
		tg := "-"
		if h.w.store.Target != nil {
			tg = strings.Join(check.ShardNames(*h.w.store.Target), ",")
		}
		fmt.Fprintf(&h.Out, "store gen=%d version=%d layout=%s target=%s phase=%v vitess primary=%s replica=%s exists=%v completed=%v effects=%d\n",
			h.w.store.Generation, h.w.store.Version, strings.Join(check.ShardNames(h.w.store.Layout), ","), tg, h.w.store.State.Phase,
			strings.Join(h.w.primary(), ","), strings.Join(h.w.replica(), ","), h.w.exists, h.w.completed, h.w.chk.Steps())
		if h.w.backlog > 0 {
			fmt.Fprintf(&h.Out, "lag=%d write_stop_ms=%d\n", h.w.lag(), h.w.writeStop)
		}
	default:
		t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	}
	if strings.Contains(h.Out.String(), "!! violation") {
		t.Errorf("%s: invariant broken:\n%s", d.Pos, h.Out.String())
	}
	return h.Out.String()
}

// TestActionsCovered: the package doc lists exactly the Act constants, and the scripts show
// every one of them being emitted.
func TestActionsCovered(t *testing.T) {
	machinetest.ActionsCovered(t, os.DirFS("."), "machine.go", vreshard.Spec)
}
