package render

import "fmt"

// Secret is a password. It prints as [secret] under every fmt verb and JSON-encodes the same
// way, so a Credentials value that reaches a log line or an error message does not carry
// the password with it. The renderer is the one place that reads it back (string(s)).
type Secret string

const redacted = "[secret]"

// Format makes every fmt verb (%v, %+v, %#v, %s, %q, %x, ...) print [secret].
func (Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// MarshalJSON encodes a Secret as "[secret]": structured loggers that JSON-encode values
// must not leak it either. Credentials are an input to rendering, not a storage format.
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// Credentials are the logins the rendered files carry. Every secret in them goes to
// users.toml (PgDog) or to vtgate's static auth file (Vitess) and never to pgdog.toml, so
// pgdog.toml can live in a ConfigMap and the secret files in a Secret.
type Credentials struct {
	// Users are the application logins. PgDog maps each to the database, the reshard
	// destination while one exists (PgDog's CUTOVER swaps users' databases along with the
	// databases, so a user that is not on the destination loses the database at cutover),
	// and every branch. Vitess lists each in the static auth file.
	Users []User
	// SchemaAdmin is the login PgDog's RESHARD, COPY_DATA, REPLICATE and SCHEMA_SYNC run
	// as (schema_admin = true on the database and on the reshard destination). Required
	// while the record is resharding or cutting over; optional otherwise (Name "" = none).
	// Vitess lists it in the static auth file like any user.
	SchemaAdmin User
	// Admin is the login of PgDog's admin database, through which Loam sends RELOAD,
	// PAUSE and RESUME. Required for PgDog: without a password PgDog picks a random one at
	// start and the admin database is locked. Unused for Vitess.
	Admin Admin
}

// User is one login.
type User struct {
	Name     string
	Password Secret
	// Groups are vtgate's table-ACL groups for this user (Vitess only; PgDog ignores them).
	Groups []string
}

// Admin is PgDog's admin login.
type Admin struct {
	// User is the admin user name; "" means PgDog's default, "admin".
	User     string
	Password Secret
}
