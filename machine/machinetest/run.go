package machinetest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"loam.dev/router/machine"
)

// Run is what the interaction harness of a machine that runs one command at a time
// (failover, vreshard) keeps besides the machine and its world: the trace recorder, the
// clock, the seeded randomness, the commands waiting for the script's answer, the timers,
// and the output of the directive being handled. Embed it in the harness.
type Run[Cmd any] struct {
	Rec     *machine.Recorder
	Now     int64
	Rand    *rand.Rand
	Pending []Cmd
	Timers  Timers
	Out     strings.Builder
}

// Begin starts a script's run at now: a new recorder, randomness seeded the same in every
// script, no command pending, no timer.
func (r *Run[Cmd]) Begin(now int64) {
	r.Rec, r.Now, r.Rand = &machine.Recorder{}, now, rand.New(rand.NewPCG(1, 2))
	r.Pending, r.Timers = nil, Timers{}
}

// Step feeds m one input at r.Now and writes what happened to r.Out the scripts' way: "> "
// and the header, every spec event the step emitted ("  spec …"), every command ("  cmd
// …"), and the violations the world found (which it clears). Timer commands go to
// r.Timers; every other command is handed to other, which says whether it waits for the
// script's answer (it is then appended to r.Pending).
func Step[In, Cmd any](r *Run[Cmd], m machine.Machine[In, Cmd], header string, in In, other func(Cmd) bool, violations *[]string) {
	cmds := m.On(&machine.Ctx{Now: r.Now, Rand: r.Rand, Trace: r.Rec}, in)
	fmt.Fprintf(&r.Out, "> %s\n", header)
	for _, e := range r.Rec.Take() {
		fmt.Fprintf(&r.Out, "  spec %s\n", e)
	}
	for _, c := range cmds {
		fmt.Fprintf(&r.Out, "  cmd  %s\n", any(c))
		if r.Timers.Record(c) {
			continue
		}
		if other(c) {
			r.Pending = append(r.Pending, c)
		}
	}
	for _, v := range *violations {
		fmt.Fprintf(&r.Out, "  !! violation: %s\n", v)
	}
	*violations = nil
}

// ActionsCovered checks a machine's list of actions three ways: the Act… string constants
// declared in code (a file of the package, in pkg: pass os.DirFS(".")), the list after
// "Actions:" in the package doc (doc.go, up to the first "("), and the actions the
// interaction scripts (pkg's testdata/interaction) show being emitted for spec must all be
// the same.
func ActionsCovered(t *testing.T, pkg fs.FS, code, spec string) {
	t.Helper()
	fset := token.NewFileSet()
	parse := func(name string, mode parser.Mode) *ast.File {
		src, err := fs.ReadFile(pkg, name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, mode)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	f := parse(code, 0)
	var consts []string
	ast.Inspect(f, func(n ast.Node) bool {
		if v, ok := n.(*ast.ValueSpec); ok && strings.HasPrefix(v.Names[0].Name, "Act") {
			s, _ := strconv.Unquote(v.Values[0].(*ast.BasicLit).Value)
			consts = append(consts, s)
		}
		return true
	})
	text := parse("doc.go", parser.ParseComments).Doc.Text()
	list := text[strings.Index(text, "Actions:")+len("Actions:"):]
	list = list[:strings.Index(list, "(")]
	var documented []string
	for _, a := range strings.Split(list, ",") {
		documented = append(documented, strings.TrimSpace(a))
	}
	want := sorted(consts)
	if got := sorted(documented); !slices.Equal(got, want) {
		t.Errorf("the package doc lists the actions %v; the code declares %v", got, want)
	}
	scripts, err := fs.Sub(pkg, "testdata/interaction")
	if err != nil {
		t.Fatal(err)
	}
	if got := sorted(ScriptActions(t, scripts, spec)); !slices.Equal(got, want) {
		t.Errorf("the scripts show the actions %v; the code declares %v (the scripts show every action, and no other)", got, want)
	}
}

// sorted is s sorted (a multiset: an action listed twice is a difference).
func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }
