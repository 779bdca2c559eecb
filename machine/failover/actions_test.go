package failover_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine/failover"
	"loam.dev/router/machine/machinetest"
)

// TestActionsCovered: the package doc lists exactly the Act constants, and the
// interaction scripts show every one of them being emitted, and no other.
func TestActionsCovered(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "failover.go", nil, 0)
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
	list := text[strings.Index(text, "Actions:")+len("Actions:"):]
	list = list[:strings.Index(list, "(")]
	var documented []string
	for _, a := range strings.Split(list, ",") {
		documented = append(documented, strings.TrimSpace(a))
	}
	require.ElementsMatch(t, consts, documented)
	require.ElementsMatch(t, consts, machinetest.ScriptActions(t, os.DirFS("testdata/interaction"), failover.Spec),
		"the scripts show every action, and no other")
}
