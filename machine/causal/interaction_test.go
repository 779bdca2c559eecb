package causal_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"loam.dev/router/kernel/lsn"
	"loam.dev/router/machine"
	"loam.dev/router/machine/causal"
	"loam.dev/router/machine/machinetest"
)

// TestInteraction replays the scenario files in testdata/ (regenerate with -rewrite and read
// the diff: the goldens are the specification of behaviour).
//
// Verbs (every verb takes t=<ms>, which becomes ctx.Now and never goes back):
//
//	hostgroup hg=<n> eps=(host:port,...)          SetHostgroup
//	sample ep=host:port lsn=<pg_lsn>|unknown      Sampled, sent at t
//	poll ep=host:port from=<ms> every=<ms> lsn=<pg_lsn>|unknown
//	                                              a sample every <every> ms from <from> up to t
//	execute fe=<name> hg=<n> ep=host:port         Executed
//	acquire id=<n> fe=<name> hg=<n>               Acquire
//	causal id=<n> fe=<name> hg=<n> from=<n> timeout=<ms>
//	                                              AcquireCausal with Deadline t+timeout
//	cancel id=<n> / disconnect fe=<name>          Cancel / Disconnected
//	tick                                          fire every timer due at t, in deadline order
//	stats                                         the stats view
//	history ep=host:port                          retained samples of one endpoint
//
// The output lists the commands (cmd ...) and spec events (spec ...) of each step; Observe
// events are left out of poll's output to keep the files short. Each script is also run
// with the machine restored from a snapshot before every directive (machinetest.Scripts):
// the snapshot is the in-memory copy the simulator forks a run with, not JSON, so the
// harness restores it itself.
func TestInteraction(t *testing.T) {
	machinetest.Scripts(t, "testdata", newEnv)
}

type env struct {
	m      *causal.Machine
	rec    *machine.Recorder
	ctx    *machine.Ctx
	timers machinetest.Timers
}

func newEnv() *env {
	rec := &machine.Recorder{}
	return &env{
		m:      causal.New(causal.Config{Window: 1000}),
		rec:    rec,
		ctx:    &machine.Ctx{Rand: rand.New(rand.NewChaCha8([32]byte{7})), Trace: rec},
		timers: machinetest.Timers{},
	}
}

// Restore implements machinetest.Harness with the in-memory snapshot.
func (e *env) Restore(testing.TB) { e.m = causal.Restore(e.m.Snapshot()) }

// Handle implements machinetest.Harness.
func (e *env) Handle(t *testing.T, d *datadriven.TestData) string {
	if d.HasArg("t") {
		var now int64
		d.ScanArgs(t, "t", &now)
		if now < e.ctx.Now {
			t.Fatalf("%s: t=%d goes back from %d", d.Pos, now, e.ctx.Now)
		}
		e.ctx.Now = now
	}
	num := func(key string) int { return machinetest.Need[int](t, d, key) }
	str := func(key string) string { return machinetest.Need[string](t, d, key) }
	var out []causal.Command
	quiet := false
	switch d.Cmd {
	case "hostgroup":
		out = e.on(causal.SetHostgroup{Hostgroup: num("hg"), Endpoints: eps(t, d, "eps")})
	case "sample":
		out = e.on(causal.Sampled{Endpoint: eps(t, d, "ep")[0], Sample: sample(t, d, e.ctx.Now)})
	case "poll":
		quiet = true
		every := int64(num("every"))
		now := e.ctx.Now
		for ts := int64(num("from")); ts <= now; ts += every {
			e.ctx.Now = ts
			out = append(out, e.on(causal.Sampled{Endpoint: eps(t, d, "ep")[0], Sample: sample(t, d, ts)})...)
		}
		e.ctx.Now = now
	case "execute":
		out = e.on(causal.Executed{Frontend: str("fe"), Hostgroup: num("hg"), Endpoint: eps(t, d, "ep")[0]})
	case "acquire":
		out = e.on(causal.Acquire{ID: uint64(num("id")), Frontend: str("fe"), Hostgroup: num("hg")})
	case "causal":
		out = e.on(causal.AcquireCausal{ID: uint64(num("id")), Frontend: str("fe"), Hostgroup: num("hg"),
			From: num("from"), Deadline: e.ctx.Now + int64(num("timeout"))})
	case "cancel":
		out = e.on(causal.Cancel{ID: uint64(num("id"))})
	case "disconnect":
		out = e.on(causal.Disconnected{Frontend: str("fe")})
	case "tick":
		for id, _, ok := e.timers.Pop(e.ctx.Now); ok; id, _, ok = e.timers.Pop(e.ctx.Now) {
			out = append(out, e.on(causal.TimerFired{ID: id})...)
		}
	case "stats":
		var b strings.Builder
		for _, r := range e.m.Rows() {
			fmt.Fprintln(&b, r)
		}
		return b.String()
	case "history":
		h := e.m.History(eps(t, d, "ep")[0])
		if h == nil {
			return "none\n"
		}
		var b strings.Builder
		for _, s := range h.Samples() {
			fmt.Fprintf(&b, "%d %s\n", s.Sent, s.LSN)
		}
		fmt.Fprintf(&b, "retained=%d\n", h.Len())
		return b.String()
	default:
		t.Fatalf("%s: unknown verb %q", d.Pos, d.Cmd)
	}
	var b strings.Builder
	for _, c := range out {
		fmt.Fprintln(&b, "cmd ", formatCmd(c))
	}
	for _, ev := range e.rec.Take() {
		if quiet && ev.Action == causal.ActObserve {
			continue
		}
		fmt.Fprintln(&b, "spec", ev.String())
	}
	if b.Len() == 0 {
		return "ok\n"
	}
	return b.String()
}

func (e *env) on(in causal.Input) []causal.Command {
	cmds := e.m.On(e.ctx, in)
	for _, c := range cmds {
		e.timers.Record(c)
	}
	return cmds
}

func formatCmd(c causal.Command) string {
	switch c := c.(type) {
	case causal.Route:
		var names []string
		for _, ep := range c.Endpoints {
			names = append(names, ep.String())
		}
		s := fmt.Sprintf("Route id=%d eps=(%s) causal=%v", c.ID, strings.Join(names, ","), c.Causal)
		if c.Constrained {
			s += " req=" + c.Requirement.String()
		}
		return s
	case causal.Fail:
		return fmt.Sprintf("Fail id=%d err=%v", c.ID, c.Err)
	case causal.SetTimer:
		return fmt.Sprintf("SetTimer id=%s at=%d", c.ID, c.At)
	case causal.CancelTimer:
		return fmt.Sprintf("CancelTimer id=%s", c.ID)
	}
	return fmt.Sprintf("%T", c)
}

func eps(t *testing.T, d *datadriven.TestData, key string) []lsn.Endpoint {
	for _, a := range d.CmdArgs {
		if a.Key != key {
			continue
		}
		var out []lsn.Endpoint
		for _, v := range a.Vals {
			host, port, ok := strings.Cut(v, ":")
			p, err := strconv.ParseUint(port, 10, 16)
			if !ok || err != nil {
				t.Fatalf("%s: %s=%q is not host:port", d.Pos, key, v)
			}
			out = append(out, lsn.Endpoint{Host: host, Port: uint16(p)})
		}
		return out
	}
	t.Fatalf("%s: missing %s=", d.Pos, key)
	return nil
}

func sample(t *testing.T, d *datadriven.TestData, sent int64) lsn.Sample {
	v := machinetest.Need[string](t, d, "lsn")
	if v == "unknown" {
		return lsn.Unknown(sent)
	}
	l, err := lsn.Parse(v)
	if err != nil {
		t.Fatalf("%s: %v", d.Pos, err)
	}
	return lsn.Observed(sent, l)
}
