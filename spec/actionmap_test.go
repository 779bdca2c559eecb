// Package spec holds the Quint models of the protocols (spec/*.qnt, checked by `make spec`,
// see run.sh) and the Go test that ties each model's actions to the machine emitting them.
package spec

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// pending lists the specs the machines emit whose Quint model is not in the tree yet (issue
// 18). A spec leaves this list when its model lands; the test fails if a listed spec has a
// model (so the list cannot go stale) or an unlisted one has none.
var pending = map[string]bool{}

// TestActionMap is the action-to-code map of the design (§11.3 of seed 000): for every spec
// a machine emits, the model's header lists its actions, each action is emitted by the model
// (named in the model's text) and by the machine, and every action the machine emits is
// either in the model or listed under "Not modelled:" there. The machine's actions are its
// package doc's "Spec: X. Actions: ..." list — which each machine's own test holds equal to
// the actions its code emits (TestActionsCovered and its kin) — and, besides, every literal
// action of a ctx.Emit(Spec, "...") call in its code.
func TestActionMap(t *testing.T) {
	code := machineActions(t, "../machine")
	require.NotEmpty(t, code)
	for spec, acts := range code {
		t.Run(spec, func(t *testing.T) {
			path := spec + ".qnt"
			text, err := os.ReadFile(path)
			if pending[spec] {
				require.Error(t, err, "%s exists: remove %s from pending", path, spec)
				t.Skipf("skipped: no model of %s yet (pending, issue 18)", spec)
			}
			require.NoError(t, err, "machine/ emits spec %s (actions %v) but spec/%s is missing", spec, acts, path)
			modelled, notModelled := headerActions(t, path, string(text))
			for _, a := range modelled {
				require.Contains(t, acts, a, "%s lists action %s, which no machine emits for spec %s", path, a, spec)
				require.Contains(t, string(text), `"`+a+`"`, "%s lists action %s but no model action emits it", path, a)
			}
			for _, a := range notModelled {
				require.Contains(t, acts, a, "%s says %s is not modelled, but no machine emits it", path, a)
				require.NotContains(t, modelled, a, "%s lists %s both as modelled and not", path, a)
			}
			for _, a := range acts {
				require.True(t, slices.Contains(modelled, a) || slices.Contains(notModelled, a),
					"machine emits %s.%s, which %s neither models nor lists under 'Not modelled:'", spec, a, path)
			}
		})
	}
}

var (
	docSpec = regexp.MustCompile(`Spec:? ([A-Za-z]+)(?: \([^)]*\))?\. Actions: ([A-Za-z, ]+)`)
	emitLit = regexp.MustCompile(`Emit\(Spec, "([A-Za-z]+)"`)
	// An action named by a constant (configpush, causal): Emit(Spec, ActX, ...) with
	// ActX = "X" declared in the package.
	emitConst = regexp.MustCompile(`Emit\(Spec, (Act[A-Za-z]+)[,)]`)
	actConst  = regexp.MustCompile(`(?m)^\s*(Act[A-Za-z]+)\s*=\s*"([A-Za-z]+)"`)
	specLit   = regexp.MustCompile(`(?m)^const Spec = "([A-Za-z]+)"`)
)

// machineActions returns, per spec, the sorted actions the machines under dir emit.
func machineActions(t *testing.T, dir string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	pkgs, err := filepath.Glob(filepath.Join(dir, "*", "doc.go"))
	require.NoError(t, err)
	for _, doc := range pkgs {
		f, err := parser.ParseFile(token.NewFileSet(), doc, nil, parser.PackageClauseOnly|parser.ParseComments)
		require.NoError(t, err)
		text := strings.Join(strings.Fields(f.Doc.Text()), " ")
		m := docSpec.FindStringSubmatch(text)
		if m == nil {
			continue // not a machine with a spec (machinetest has no doc.go)
		}
		spec := m[1]
		set := map[string]bool{}
		for _, a := range strings.Split(m[2], ",") {
			if a = strings.TrimSpace(a); a != "" {
				set[a] = true
			}
		}
		srcs, err := filepath.Glob(filepath.Join(filepath.Dir(doc), "*.go"))
		require.NoError(t, err)
		consts := map[string]string{}
		var used []string
		for _, src := range srcs {
			if strings.HasSuffix(src, "_test.go") {
				continue
			}
			b, err := os.ReadFile(src)
			require.NoError(t, err)
			if sm := specLit.FindSubmatch(b); sm != nil {
				require.Equal(t, spec, string(sm[1]), "%s: const Spec differs from its doc's Spec line", src)
			}
			for _, em := range emitLit.FindAllSubmatch(b, -1) {
				set[string(em[1])] = true
			}
			for _, c := range actConst.FindAllSubmatch(b, -1) {
				consts[string(c[1])] = string(c[2])
			}
			for _, em := range emitConst.FindAllSubmatch(b, -1) {
				used = append(used, string(em[1]))
			}
		}
		for _, c := range used {
			a, ok := consts[c]
			require.True(t, ok, "%s: Emit(Spec, %s) names a constant the package does not declare", filepath.Dir(doc), c)
			set[a] = true
		}
		for a := range set {
			out[spec] = append(out[spec], a)
		}
		sort.Strings(out[spec])
	}
	return out
}

// headerActions reads a model's "// Actions:" and "// Not modelled:" lists (a list goes on
// over the comment lines indented by three spaces after it).
func headerActions(t *testing.T, path, text string) (modelled, notModelled []string) {
	t.Helper()
	list := func(key string) []string {
		lines := strings.Split(text, "\n")
		for i, l := range lines {
			if !strings.HasPrefix(l, "// "+key+":") {
				continue
			}
			body := strings.TrimPrefix(l, "// "+key+":")
			for _, c := range lines[i+1:] {
				if !strings.HasPrefix(c, "//   ") {
					break
				}
				body += "," + strings.TrimPrefix(c, "//   ")
			}
			var out []string
			for _, a := range strings.Split(body, ",") {
				if a = strings.TrimSpace(a); a != "" {
					require.Regexp(t, `^[A-Z][A-Za-z]*$`, a, "%s: %q in its %s list is not an action name", path, a, key)
					out = append(out, a)
				}
			}
			return out
		}
		return nil
	}
	modelled = list("Actions")
	require.NotEmpty(t, modelled, "%s has no '// Actions:' header line", path)
	return modelled, list("Not modelled")
}

// TestHeaderActions: the header parser reads continued lists and stops at the next line.
func TestHeaderActions(t *testing.T) {
	m, n := headerActions(t, "x.qnt", "// Actions: A, B,\n//   C\n// Not modelled: D\n// (prose, E)\n")
	require.Equal(t, []string{"A", "B", "C"}, m)
	require.Equal(t, []string{"D"}, n)
}
