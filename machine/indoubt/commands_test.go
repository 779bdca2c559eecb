package indoubt_test

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine/indoubt"
)

// normalCommands is every command type of a normal build, as values for reflection.
var normalCommands = []indoubt.Command{
	indoubt.ListPrepared{}, indoubt.ListInstances{}, indoubt.Alert{}, indoubt.ClearAlert{}, indoubt.SetTimer{},
}

// commandTypeNames lists the types that implement Command in the package's files for a
// build with the given tags: the receivers of isCommand methods. The marker is unexported,
// so no other package can add a command; this finds every one this package has.
func commandTypeNames(t *testing.T, tags ...string) []string {
	t.Helper()
	bc := build.Default
	bc.BuildTags = tags
	pkg, err := bc.ImportDir(".", 0)
	require.NoError(t, err)
	fset := token.NewFileSet()
	var names []string
	for _, f := range pkg.GoFiles {
		file, err := parser.ParseFile(fset, filepath.Join(pkg.Dir, f), nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range file.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || fd.Name.Name != "isCommand" {
				continue
			}
			typ := fd.Recv.List[0].Type
			if st, ok := typ.(*ast.StarExpr); ok {
				typ = st.X
			}
			names = append(names, typ.(*ast.Ident).Name)
		}
	}
	slices.Sort(names)
	return names
}

// resolvingWords are what a command able to finish a transaction would be called, or carry.
var resolvingWords = []string{"commit", "rollback", "resolve", "abort", "finish", "decide", "exec", "sql", "query", "statement"}

// cannotResolve reports every way a command type could ask for a transaction to be
// finished: a name that says so, or a field that could carry an arbitrary request (a
// function, a channel, an interface, a pointer).
func cannotResolve(typ reflect.Type) []string {
	var out []string
	word := func(where, name string) {
		for _, w := range resolvingWords {
			if strings.Contains(strings.ToLower(name), w) {
				out = append(out, fmt.Sprintf("%s %q names %q", where, name, w))
			}
		}
	}
	word("type", typ.Name())
	var walk func(path string, t reflect.Type)
	walk = func(path string, t reflect.Type) {
		switch t.Kind() {
		case reflect.Func, reflect.Chan, reflect.Interface, reflect.Pointer, reflect.UnsafePointer, reflect.Uintptr:
			out = append(out, fmt.Sprintf("%s is a %s, which could carry any request", path, t.Kind()))
		case reflect.Slice, reflect.Array:
			walk(path+"[]", t.Elem())
		case reflect.Map:
			walk(path+"[key]", t.Key())
			walk(path+"[]", t.Elem())
		case reflect.Struct:
			for i := range t.NumField() {
				f := t.Field(i)
				word("field "+path+"."+f.Name+": name", f.Name)
				walk(path+"."+f.Name, f.Type)
			}
		}
	}
	walk(typ.Name(), typ)
	return out
}

// TestCommandsCannotResolve: the monitor's command set is exactly the five read, alert and
// timer commands, and none can name commit, rollback or any other action on a transaction,
// nor carry an arbitrary request. Adding a command makes this test fail until it is listed
// here and passes the same check.
func TestCommandsCannotResolve(t *testing.T) {
	var known []string
	for _, c := range normalCommands {
		typ := reflect.TypeOf(c)
		known = append(known, typ.Name())
		require.Empty(t, cannotResolve(typ), "command %s", typ.Name())
	}
	slices.Sort(known)
	require.Equal(t, known, commandTypeNames(t), "the package's command types are not the ones checked here")
}

// TestCannotResolveCatchesAResolver shows the check is not vacuous: a command shaped like a
// resolver is caught by name and by an open-ended field.
func TestCannotResolveCatchesAResolver(t *testing.T) {
	type RollbackPrepared struct {
		Shard string
		Run   func() error
	}
	type Innocent struct{ Payload any }
	require.Len(t, cannotResolve(reflect.TypeOf(RollbackPrepared{})), 2)
	require.Len(t, cannotResolve(reflect.TypeOf(Innocent{})), 1)
}
