package mysql_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	mysqlad "loam.dev/router/adapters/mysql"
)

func TestQuoteIdent(t *testing.T) {
	require.Equal(t, "`items`", mysqlad.QuoteIdent("items"))
	require.Equal(t, "`a``b`", mysqlad.QuoteIdent("a`b"))
	require.Equal(t, "`x``; DROP TABLE t; --`", mysqlad.QuoteIdent("x`; DROP TABLE t; --"))
	require.Equal(t, "`db.t`", mysqlad.QuoteIdent("db.t"), "one identifier, dot and all")
}

// TestRealQuoteIdent: the server reads every quoted name back as the name itself: a table
// created under QuoteIdent(name) is listed as name. Names are drawn from what MariaDB allows
// in a table name: no NUL, no trailing space, at most 64 characters, and no character beyond
// the Basic Multilingual Plane (identifiers are utf8mb3: error 1300, whatever the quoting).
func TestRealQuoteIdent(t *testing.T) {
	s := my.Get(t)
	db := openSQL(t, s.RootDSN(""))
	s.CreateDatabase(t, "quoting")
	alphabet := rapid.SampledFrom([]rune{'a', 'Z', '0', '`', '\'', '"', '\\', ';', '-', ' ', '#', '/', '*', '(', ')', '$', '%', '_', 'é', '世'})
	rapid.Check(t, func(rt *rapid.T) {
		runes := rapid.SliceOfN(alphabet, 1, 40).Draw(rt, "name")
		name := strings.TrimRight(string(runes), " ")
		if name == "" || utf8.RuneCountInString(name) > 64 {
			return
		}
		ctx := t.Context()
		_, err := db.ExecContext(ctx, "CREATE TABLE quoting."+mysqlad.QuoteIdent(name)+" (x int)")
		require.NoError(rt, err, "%q", name)
		defer db.ExecContext(ctx, "DROP TABLE quoting."+mysqlad.QuoteIdent(name))
		var got string
		require.NoError(rt, db.QueryRowContext(ctx, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'quoting'").Scan(&got))
		require.Equal(rt, name, got)
	})
}
