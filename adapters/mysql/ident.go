package mysql

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// go-sql-driver/mysql has no identifier quoting of its own, and account names, table names
// and columns cannot be bind parameters, so they reach SQL only through QuoteIdent.

// QuoteIdent quotes name as a MySQL identifier: in backticks, each backtick doubled. The
// result is one identifier whatever name holds (dots, quotes, spaces, backticks), so it
// cannot end the identifier and start SQL of its own. Use checkName first where a name must
// also be one MySQL accepts.
func QuoteIdent(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// quoteAccount quotes user@host as ALTER USER names an account: two quoted identifiers.
func quoteAccount(user, host string) string { return QuoteIdent(user) + "@" + QuoteIdent(host) }

// checkName refuses what no MySQL identifier or account name holds: nothing at all, NUL, and
// text that is not UTF-8 (the connection's character set).
func checkName(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty %s name", what)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%s name %q contains a NUL byte", what, name)
	case !utf8.ValidString(name):
		return fmt.Errorf("%s name %q is not UTF-8", what, name)
	}
	return nil
}

// tableIdent quotes "name" or "database.name".
func tableIdent(table string) (string, error) {
	parts := strings.Split(table, ".")
	if len(parts) > 2 {
		return "", fmt.Errorf("table %q: expected name or database.name", table)
	}
	var b strings.Builder
	for i, p := range parts {
		if err := checkName("table", p); err != nil {
			return "", fmt.Errorf("table %q: %w", table, err)
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(QuoteIdent(p))
	}
	return b.String(), nil
}

// splitAccount splits "user@host" as CURRENT_USER() returns it: the host is after the last
// '@' (a host cannot hold one; a user name can).
func splitAccount(account string) (user, host string, err error) {
	i := strings.LastIndexByte(account, '@')
	if i < 0 {
		return "", "", fmt.Errorf("account %q is not user@host", account)
	}
	return account[:i], account[i+1:], nil
}
