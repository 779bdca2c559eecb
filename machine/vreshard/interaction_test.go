package vreshard_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/machinetest"
	"loam.dev/router/machine/vreshard"
)

// TestInteraction replays testdata/interaction/*.txt through the world, each also with the
// machine restored from its snapshot before every directive (machinetest.Scripts).
func TestInteraction(t *testing.T) {
	machinetest.Scripts(t, "testdata/interaction", func() *harness { return &harness{} })
}

type harness struct {
	m       *vreshard.Machine
	w       *world
	rec     *machine.Recorder
	now     int64
	rng     *rand.Rand
	pending []vreshard.Command
	timers  machinetest.Timers
	out     strings.Builder
}

func (h *harness) Restore(t testing.TB) {
	if h.m != nil {
		h.m = machinetest.RoundTrip(t, h.m, vreshard.Restore)
	}
}

func (h *harness) step(header string, in vreshard.Input) {
	cmds := h.m.On(&machine.Ctx{Now: h.now, Rand: h.rng, Trace: h.rec}, in)
	fmt.Fprintf(&h.out, "> %s\n", header)
	for _, e := range h.rec.Take() {
		fmt.Fprintf(&h.out, "  spec %s\n", e)
	}
	for _, c := range cmds {
		fmt.Fprintf(&h.out, "  cmd  %s\n", c)
		if h.timers.Record(c) {
			continue
		}
		switch c := c.(type) {
		case vreshard.Done:
			h.w.checkEnd(c)
		case vreshard.Alert:
		default:
			h.pending = append(h.pending, c)
		}
	}
	for _, v := range h.w.violations {
		fmt.Fprintf(&h.out, "  !! violation: %s\n", v)
	}
	h.w.violations = nil
}

func (h *harness) Handle(t *testing.T, d *datadriven.TestData) string {
	h.out.Reset()
	arg := func(k, def string) string { return machinetest.Arg(t, d, k, def) }
	switch d.Cmd {
	case "start":
		st := fixture()
		h.m, h.rec, h.now, h.rng = vreshard.New(), &machine.Recorder{}, 1000, rand.New(rand.NewPCG(1, 2))
		h.pending, h.timers = nil, machinetest.Timers{}
		h.w = newWorld(st.Record)
		h.w.mismatch, h.w.verifyFail = arg("mismatch", "") == "true", arg("verify", "") == "fail"
		h.w.copyPolls = machinetest.Arg(t, d, "copying", 1)
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
		n := machinetest.Arg(t, d, "n", len(h.pending))
		for i := 0; i < n && len(h.pending) > 0; i++ {
			c := h.pending[0]
			h.pending = h.pending[1:]
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
		for i := 0; i < 200 && (len(h.pending) > 0 || len(h.timers) > 0); i++ {
			if len(h.pending) > 0 {
				c := h.pending[0]
				h.pending = h.pending[1:]
				h.step("ok "+stepOf(c), h.w.apply(c, nil, false))
				continue
			}
			for _, at := range h.timers {
				h.now = max(h.now, at)
			}
			for id, _, ok := h.timers.Pop(h.now); ok; id, _, ok = h.timers.Pop(h.now) {
				h.step("timer "+id, vreshard.TimerFired{ID: id})
			}
		}
	case "tick":
		var ms int64
		d.ScanArgs(t, "ms", &ms)
		h.now += ms
		for id, _, ok := h.timers.Pop(h.now); ok; id, _, ok = h.timers.Pop(h.now) {
			h.step("timer "+id, vreshard.TimerFired{ID: id})
		}
	case "cancel":
		h.step("cancel", vreshard.CancelRequest{})
	case "restart":
		apply := arg("apply", "")
		for _, c := range h.pending {
			if apply != "" && strings.Contains(stepOf(c), apply) {
				h.w.apply(c, nil, false)
			}
		}
		h.pending, h.timers = nil, machinetest.Timers{}
		h.Restore(t)
		h.step("restart", vreshard.Restarted{})
	case "world":
		tg := "-"
		if h.w.store.Target != nil {
			tg = strings.Join(names(*h.w.store.Target), ",")
		}
		fmt.Fprintf(&h.out, "store gen=%d version=%d layout=%s target=%s phase=%v vitess primary=%s replica=%s exists=%v completed=%v effects=%d\n",
			h.w.store.Generation, h.w.store.Version, strings.Join(names(h.w.store.Layout), ","), tg, h.w.store.State.Phase,
			strings.Join(h.w.primary(), ","), strings.Join(h.w.replica(), ","), h.w.exists, h.w.completed, len(h.w.effects))
	default:
		t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	}
	if strings.Contains(h.out.String(), "!! violation") {
		t.Errorf("%s: invariant broken:\n%s", d.Pos, h.out.String())
	}
	return h.out.String()
}

// TestActionsCovered: the package doc lists exactly the Act constants, and the scripts show
// every one of them being emitted.
func TestActionsCovered(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "machine.go", nil, 0)
	require.NoError(t, err)
	var consts []string
	ast.Inspect(f, func(n ast.Node) bool {
		if v, ok := n.(*ast.ValueSpec); ok && strings.HasPrefix(v.Names[0].Name, "Act") {
			s, _ := strconv.Unquote(v.Values[0].(*ast.BasicLit).Value)
			consts = append(consts, s)
		}
		return true
	})
	doc, err := parser.ParseFile(fset, "doc.go", nil, parser.ParseComments)
	require.NoError(t, err)
	text := doc.Doc.Text()
	l := text[strings.Index(text, "Actions:")+len("Actions:"):]
	l = l[:strings.Index(l, "(")]
	var documented []string
	for _, a := range strings.Split(l, ",") {
		documented = append(documented, strings.TrimSpace(a))
	}
	require.ElementsMatch(t, consts, documented)
	require.ElementsMatch(t, consts, machinetest.ScriptActions(t, os.DirFS("testdata/interaction"), vreshard.Spec))
}
