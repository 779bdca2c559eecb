package pgdog

// maxName is Postgres's identifier limit (NAMEDATALEN - 1); longer names are truncated by
// the servers PgDog passes them to.
const maxName = 63

// CheckName reports whether name can be sent as an argument of an admin command, and why
// not. PgDog lowercases the whole command before parsing it, splits arguments on single
// spaces and strips semicolons (pgdog.md, "Admin wire-protocol constraints"), so a name
// with an upper-case letter, a space or a semicolon would reach PgDog as another name:
// PAUSE App pauses "app". Quotes and other non-printing or non-ASCII bytes are refused
// too: PgDog does not unquote, and lowercasing outside ASCII can change a name's bytes.
func CheckName(kind, name string) error {
	bad := func(reason string) error { return &NameError{Kind: kind, Name: name, Reason: reason} }
	if name == "" {
		return bad("is empty")
	}
	if len(name) > maxName {
		return bad("is longer than 63 bytes")
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c >= 'A' && c <= 'Z':
			return bad("has upper-case letters; PgDog lowercases every admin command, so it would act on another name (use lower case names for databases, users, publications and slots)")
		case c == ' ' || c == ';':
			return bad("contains a space or a semicolon, which PgDog's admin parser treats as separators")
		case c < 0x21 || c > 0x7e || c == '"' || c == '\'' || c == '\\':
			return bad("must be printable ASCII without quotes or backslashes")
		}
	}
	return nil
}
