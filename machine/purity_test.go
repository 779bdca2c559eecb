package machine_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The one rule: packages under machine/ and kernel/ do no I/O. These lists are the rule.

// forbiddenImports are refused outright; a prefix ending in "/" refuses the whole subtree.
var forbiddenImports = []string{
	"net", "net/", "os", "os/", "syscall", "database/sql", "sync", "plugin", "runtime/cgo",
	"io/ioutil", "log", "log/",
}

// allowedImports are exceptions to a refused subtree: log/slog's values (slog.Value,
// slog.LogValuer, so a command carrying a password can say how it is logged), never its
// loggers and handlers, which forbiddenCalls refuses.
var allowedImports = []string{"log/slog"}

// forbiddenCalls are package-level identifiers a pure package may not use (called or taken
// as a value), by import path.
var forbiddenCalls = map[string][]string{
	"time": {"Now", "Sleep", "After", "AfterFunc", "Tick", "NewTimer", "NewTicker", "Since", "Until"},
	"log/slog": {"Default", "SetDefault", "SetLogLoggerLevel", "New", "NewLogLogger", "NewTextHandler", "NewJSONHandler",
		"Debug", "DebugContext", "Info", "InfoContext", "Warn", "WarnContext", "Error", "ErrorContext", "Log", "LogAttrs", "DiscardHandler"},
}

// randPaths are the math/rand packages: only their constructors may be used, never the
// global generator behind the package-level functions.
var randPaths = map[string][]string{
	"math/rand":    {"New", "NewSource", "NewZipf", "Rand", "Source", "Source64", "Zipf"},
	"math/rand/v2": {"New", "NewPCG", "NewChaCha8", "NewZipf", "Rand", "Source", "PCG", "ChaCha8", "Zipf"},
}

type violation struct {
	pos  token.Position
	what string
}

func (v violation) String() string { return fmt.Sprintf("%s: %s", v.pos, v.what) }

func forbiddenImport(path string) bool {
	if slices.Contains(allowedImports, path) {
		return false
	}
	for _, f := range forbiddenImports {
		if path == f || strings.HasSuffix(f, "/") && strings.HasPrefix(path, f) {
			return true
		}
	}
	return false
}

// checkPurity parses every non-test Go file under root (skipping testdata) and reports
// every import and identifier that breaks the rule, plus every go statement.
func checkPurity(t *testing.T, root string, skipTestdata bool) []violation {
	t.Helper()
	var out []violation
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipTestdata && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		names := map[string]string{} // local name -> import path
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if forbiddenImport(p) {
				out = append(out, violation{fset.Position(imp.Pos()), "imports " + p})
			}
			name := p[strings.LastIndex(p, "/")+1:]
			if p == "math/rand/v2" {
				name = "rand"
			}
			if imp.Name != nil {
				name = imp.Name.Name
			}
			if name == "." && (forbiddenCalls[p] != nil || randPaths[p] != nil) {
				out = append(out, violation{fset.Position(imp.Pos()), "dot-imports " + p})
			}
			names[name] = p
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				out = append(out, violation{fset.Position(n.Pos()), "starts a goroutine"})
			case *ast.SelectorExpr:
				id, ok := n.X.(*ast.Ident)
				if !ok {
					return true
				}
				p, ok := names[id.Name]
				if !ok {
					return true
				}
				if slices.Contains(forbiddenCalls[p], n.Sel.Name) {
					out = append(out, violation{fset.Position(n.Pos()), "uses " + p + "." + n.Sel.Name})
				}
				if allowed, isRand := randPaths[p]; isRand && !slices.Contains(allowed, n.Sel.Name) {
					out = append(out, violation{fset.Position(n.Pos()), "uses the global generator " + p + "." + n.Sel.Name})
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	return out
}

// TestPurity enforces the one rule on every package under machine/ and kernel/.
func TestPurity(t *testing.T) {
	for _, root := range []string{".", "../kernel"} {
		for _, v := range checkPurity(t, root, true) {
			t.Errorf("sans-I/O rule broken: %s", v)
		}
	}
}

// TestPurityCatchesBadFixture shows the check is not vacuous: the fixture package under
// testdata/impure breaks every clause of the rule once, and each must be reported.
func TestPurityCatchesBadFixture(t *testing.T) {
	got := checkPurity(t, "testdata/impure", false)
	var whats []string
	for _, v := range got {
		whats = append(whats, v.what)
	}
	want := []string{
		"imports net/http", "imports os", "imports os/exec", "imports syscall",
		"imports database/sql", "imports sync", "imports net", "imports log", "uses log/slog.Info",
		"uses time.Now", "uses time.Sleep", "uses time.After", "uses time.Tick",
		"uses the global generator math/rand.Intn", "uses the global generator math/rand/v2.IntN",
		"starts a goroutine", "uses time.Now", // the second through an aliased import
	}
	for _, w := range want {
		i := slices.Index(whats, w)
		if i < 0 {
			t.Errorf("the purity check missed %q in the bad fixture; it reported:\n%s", w, strings.Join(whats, "\n"))
			continue
		}
		whats = slices.Delete(whats, i, i+1)
	}
	if len(whats) > 0 {
		t.Errorf("unexpected reports on the fixture: %v", whats)
	}
}
