package failover_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestActionsCovered: the package doc lists exactly the Act constants, and the
// interaction scripts show every one of them being emitted.
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

	seen := map[string]bool{}
	re := regexp.MustCompile(`spec PrimaryFailover (\w+)`)
	files, _ := filepath.Glob("testdata/interaction/*.txt")
	for _, p := range files {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			seen[m[1]] = true
		}
	}
	for _, a := range consts {
		require.True(t, seen[a], "no script shows action %s", a)
	}
}
