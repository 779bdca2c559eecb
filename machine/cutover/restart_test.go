package cutover_test

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine"
	"loam.dev/router/machine/cutover"
	"loam.dev/router/machine/machinetest"
)

// reliable drives a cutover in a world that answers everything at once, except that
// commands matching failing always fail. At the restartAt-th On call it restarts the
// machine from its snapshot (JSON round trip); with applied the commands in flight ran
// before the crash. It returns the Done, the world's violations, the number of On calls
// and every action emitted.
func reliable(t *testing.T, decision cutover.Input, failing string, restartAt int, applied bool) (cutover.Done, []string, int, map[string]bool) {
	t.Helper()
	return reliableWith(t, worldRun{decision: decision, failing: failing, restartAt: restartAt, applied: applied})
}

// worldRun is what reliableWith varies: reliable's knobs, the machine's mutants and a
// script that takes over the delivery of some commands.
type worldRun struct {
	decision  cutover.Input
	failing   string
	restartAt int
	applied   bool
	mutants   cutover.Mutants
	// deliver, when set, is offered each command the world would answer next: it returns
	// false to leave it to the world, or true if it answered it (with feed), held it, or
	// dropped it. idle, when set, is called before a timer fires with nothing in flight:
	// true if it fed something (a held command's answer).
	deliver func(w *world, c cutover.Command, feed func(cutover.Input)) bool
	idle    func(w *world, feed func(cutover.Input)) bool
	// setup, when set, shapes the world before the cutover starts.
	setup func(w *world)
	// settle is Options.ReverseSettle (0: none).
	settle int64
}

// reliableWith is reliable run by r.
func reliableWith(t *testing.T, r worldRun) (cutover.Done, []string, int, map[string]bool) {
	t.Helper()
	decision, failing, restartAt, applied := r.decision, r.failing, r.restartAt, r.applied
	names := []string{"pgdog-1", "pgdog-2", "pgdog-3"}
	w := newWorld(fixture(), names, "pgdog-1", 0)
	w.lag, w.syncPolls = 3000, 1
	if r.setup != nil {
		r.setup(w)
	}
	opts := cutover.Options{LagThreshold: 1000, PollEvery: 1000, CatchUpDeadline: 60_000, RetryAfter: 100, Attempts: 2, Grace: 5000, ReverseSettle: r.settle, Mutants: r.mutants}
	m := cutover.New()
	rec := &machine.Recorder{}
	rng := rand.New(rand.NewPCG(3, 4))
	now, calls := int64(1000), 0
	w.clock = &now
	var pending []cutover.Command
	timers := machinetest.Timers{}
	var done *cutover.Done
	actions := map[string]bool{}
	var feed func(in cutover.Input)
	feed = func(in cutover.Input) {
		calls++
		for _, c := range m.On(&machine.Ctx{Now: now, Rand: rng, Trace: rec}, in) {
			if timers.Record(c) {
				continue
			}
			switch c := c.(type) {
			case cutover.Done:
				done = &c
				w.checkEnd(c)
			case cutover.Alert:
				w.alert(c)
			default:
				w.send(c)
				pending = append(pending, c)
			}
		}
		for _, e := range rec.Take() {
			actions[e.Action] = true
		}
		if calls == restartAt {
			if applied {
				for _, c := range pending {
					w.ranUnanswered(c)
				}
			}
			w.crash()
			pending, timers = nil, machinetest.Timers{}
			m = machinetest.RoundTrip(t, m, cutover.Restore)
			feed(cutover.Restarted{})
		}
	}
	feed(cutover.Start{Record: fixture(), Plan: cutover.Plan{Designated: "pgdog-1", Instances: names, Role: "app", Publication: "app_pub", Options: opts}})
	decided := false
	for i := 0; done == nil && i < 10_000; i++ {
		if len(pending) > 0 {
			c := pending[0]
			pending = pending[1:]
			if r.deliver != nil && r.deliver(w, c, feed) {
				continue
			}
			var err error
			if failing != "" && glob(failing, stepOf(c)) {
				err = errors.New("unreachable")
			}
			feed(w.apply(c, err, false))
			continue
		}
		if r.idle != nil && r.idle(w, feed) {
			continue
		}
		if at, ok := timers.Next(); ok {
			now = max(now, at)
			id, _, _ := timers.Pop(now)
			feed(cutover.TimerFired{ID: id})
			continue
		}
		if decided {
			t.Fatalf("stuck: nothing in flight, no timer, not done")
		}
		decided = true
		feed(decision)
	}
	require.NotNil(t, done, "no Done")
	return *done, w.violations, calls, actions
}

// TestRestartEverywhere restarts the daemon after every single On call of a finalize, a
// reverse and a rollback, with the commands in flight lost or run, and requires the same
// outcome and no broken invariant each time.
func TestRestartEverywhere(t *testing.T) {
	for _, tc := range []struct {
		name     string
		decision cutover.Input
		failing  string
		want     cutover.Outcome
	}{
		{"finalize", cutover.Finalize{}, "", cutover.Finalized},
		{"reverse", cutover.Reverse{}, "", cutover.Reversed},
		{"rollback", cutover.Finalize{}, "*/fence/s1*", cutover.RolledBack},
		{"lagging", cutover.Finalize{}, "*/reload/pgdog-3*", cutover.Finalized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, v, calls, _ := reliable(t, tc.decision, tc.failing, -1, false)
			require.Empty(t, v)
			require.Equal(t, tc.want, base.Outcome)
			for k := 1; k <= calls; k++ {
				for _, applied := range []bool{false, true} {
					d, v, _, _ := reliable(t, tc.decision, tc.failing, k, applied)
					require.Empty(t, v, "restart after call %d (applied %v)", k, applied)
					require.Equal(t, tc.want, d.Outcome, "restart after call %d (applied %v): %s", k, applied, d.Reason)
					require.Equal(t, base.Generation, d.Generation)
				}
			}
		})
	}
}

// TestActionsDocumented: the package doc lists exactly the actions the code emits, and a
// sweep of random runs emits every one of them (an action nobody reaches is either dead
// code or an untested path).
func TestActionsDocumented(t *testing.T) {
	documented := docActions(t)
	inCode := codeActions(t)
	require.ElementsMatch(t, documented, inCode, "doc.go's action list and the emitters in code differ")

	seen := map[string]bool{}
	for _, tc := range []struct {
		decision cutover.Input
		failing  string
	}{{cutover.Finalize{}, ""}, {cutover.Reverse{}, ""}, {cutover.Finalize{}, "*/fence/s1*"}} {
		for k := -1; k < 40; k += 7 {
			_, _, _, a := reliable(t, tc.decision, tc.failing, k, k%2 == 0)
			for x := range a {
				seen[x] = true
			}
		}
	}
	all := func() bool {
		for _, a := range documented {
			if !seen[a] {
				return false
			}
		}
		return true
	}
	for seed := uint64(0); seed < 5000 && !all(); seed++ {
		r := rngChooser{rand.New(rand.NewPCG(seed, 2))}
		cfg := runConfig{instances: 1 + int(seed%4), attempts: 1 + int(seed%3), finalize: int(seed % 3), chaos: 150, foreign: seed%2 == 0}
		if seed%7 == 0 {
			cfg.deadline = 1500
		}
		res := runTraced(r, cfg)
		for x := range res {
			seen[x] = true
		}
	}
	var missing []string
	for _, a := range documented {
		if !seen[a] {
			missing = append(missing, a)
		}
	}
	require.Empty(t, missing, "actions never emitted by the sweep")
}

// runTraced is run with the actions it emitted.
func runTraced(c chooser, cfg runConfig) map[string]bool {
	cfg.trace = &machine.Recorder{}
	run(c, cfg)
	out := map[string]bool{}
	for _, e := range cfg.trace.Events {
		out[e.Action] = true
	}
	return out
}

func docActions(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments)
	require.NoError(t, err)
	doc := f.Doc.Text()
	i := strings.Index(doc, "Spec: Cutover. Actions:")
	require.GreaterOrEqual(t, i, 0)
	list := doc[i+len("Spec: Cutover. Actions:"):]
	list = list[:strings.Index(list, ".")]
	var out []string
	for _, a := range strings.Split(list, ",") {
		out = append(out, strings.TrimSpace(a))
	}
	return out
}

// codeActions collects every action name the package's code can emit: the string
// literal after Spec in ctx.Emit calls, and the strings of the op action tables.
func codeActions(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	require.NoError(t, err)
	seen := map[string]bool{}
	name := regexp.MustCompile(`^[A-Z][A-Za-z]+$`)
	for _, p := range pkgs {
		for _, f := range p.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Emit" && len(n.Args) >= 2 {
						if lit, ok := n.Args[1].(*ast.BasicLit); ok {
							s, _ := strconv.Unquote(lit.Value)
							seen[s] = true
						}
					}
				case *ast.FuncDecl:
					if n.Name.Name != "action" {
						return true
					}
					ast.Inspect(n.Body, func(m ast.Node) bool {
						if r, ok := m.(*ast.ReturnStmt); ok && len(r.Results) == 1 {
							if lit, ok := r.Results[0].(*ast.BasicLit); ok {
								s, _ := strconv.Unquote(lit.Value)
								seen[s] = true
							}
						}
						return true
					})
				case *ast.ValueSpec:
					if len(n.Names) == 1 && n.Names[0].Name == "actionOf" {
						ast.Inspect(n, func(m ast.Node) bool {
							if kv, ok := m.(*ast.KeyValueExpr); ok {
								if lit, ok := kv.Value.(*ast.BasicLit); ok {
									s, _ := strconv.Unquote(lit.Value)
									seen[s] = true
								}
							}
							return true
						})
					}
				}
				return true
			})
		}
	}
	var out []string
	for s := range seen {
		if name.MatchString(s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}
