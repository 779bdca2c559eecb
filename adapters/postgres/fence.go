package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// FenceMarker is the role-level setting through which a fence remembers whose login it
// took: ALTER ROLE … SET loam.fenced_by = '["app"]' on every role it made NOLOGIN, naming
// the fenced roles that took it (JSON list). UnfenceWrites gives a login back only when the
// last fence that took it is lifted, and never touches a role that was NOLOGIN before (a
// group role, or one an operator locked by hand). The setting lives in the shared catalog
// pg_db_role_setting, so it survives restarts of this process and of the server, and it is
// written in the same transaction as the NOLOGIN, so no crash leaves one without the other.
const FenceMarker = "loam.fenced_by"

// fenceRound bounds how many times FenceWrites takes logins and ends sessions before it
// gives up: each round ends with a check, and a round repeats only when something changed
// underneath (a role granted membership, someone's ALTER ROLE … LOGIN).
const fenceRounds = 5

// fenceRole is one role a fence of target applies to.
type fenceRole struct {
	oid      uint32
	name     string
	canLogin bool
	target   bool
	marks    []string // the fenced roles whose fence took this role's login
}

// fenceRolesQuery lists target and every role that can act as target: its members, direct
// or through other roles, with or without INHERIT, since a member can SET ROLE to it.
// Superusers count as members of every role and are left out: a superuser can become any
// role, no fence stops that, and fencing them would lock out administration.
const fenceRolesQuery = `WITH t AS (SELECT oid FROM pg_roles WHERE rolname = $1)
SELECT r.oid, r.rolname::text, r.rolcanlogin, r.oid = t.oid,
  (SELECT c FROM pg_db_role_setting s, unnest(s.setconfig) AS c
    WHERE s.setrole = r.oid AND s.setdatabase = 0 AND starts_with(c, 'loam.fenced_by=') LIMIT 1)
FROM pg_roles r, t
WHERE r.oid = t.oid OR (NOT r.rolsuper AND pg_has_role(r.oid, t.oid, 'MEMBER'))
ORDER BY r.oid <> t.oid, r.rolname`

// unfenceRolesQuery lists target and every role carrying a fence marker, member or not any
// more: a membership revoked while fenced must not keep the role locked out for ever.
const unfenceRolesQuery = `WITH t AS (SELECT oid FROM pg_roles WHERE rolname = $1),
m AS (SELECT s.setrole, c FROM pg_db_role_setting s, unnest(s.setconfig) AS c
      WHERE s.setdatabase = 0 AND starts_with(c, 'loam.fenced_by='))
SELECT r.oid, r.rolname::text, r.rolcanlogin, r.oid = t.oid, m.c
FROM pg_roles r CROSS JOIN t LEFT JOIN m ON m.setrole = r.oid
WHERE r.oid = t.oid OR m.c IS NOT NULL
ORDER BY r.oid <> t.oid, r.rolname`

// querier is a transaction or a connection: the roles are read by one statement, so in
// one snapshot either way.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func (b *Backend) fenceRoles(ctx context.Context, q querier, op, role string) ([]fenceRole, error) {
	return b.readRoles(ctx, q, op, role, fenceRolesQuery)
}

func (b *Backend) readRoles(ctx context.Context, q querier, op, role, query string) ([]fenceRole, error) {
	rows, err := q.Query(ctx, query, role)
	if err != nil {
		return nil, err
	}
	var out []fenceRole
	for rows.Next() {
		var r fenceRole
		var marker *string
		if err := rows.Scan(&r.oid, &r.name, &r.canLogin, &r.target, &marker); err != nil {
			rows.Close()
			return nil, err
		}
		if marker != nil {
			if r.marks, err = ParseFenceMarker(strings.TrimPrefix(*marker, FenceMarker+"=")); err != nil {
				rows.Close()
				return nil, b.failf(op, "", "role %q: %v; remove it by hand (ALTER ROLE … RESET %s) once you know which fence took the role's login", r.name, err, FenceMarker)
			}
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 || !out[0].target {
		return nil, b.failf(op, CodeUndefinedObject, "role %q does not exist (check the application role's name: fencing a wrong name would leave the real role writing)", role)
	}
	return out, nil
}

// ParseFenceMarker reads the value of a FenceMarker setting: a JSON list of role names.
func ParseFenceMarker(v string) ([]string, error) {
	var names []string
	if err := json.Unmarshal([]byte(v), &names); err != nil {
		return nil, fmt.Errorf("setting %s = %q is not a JSON list of role names: %w", FenceMarker, v, err)
	}
	if names == nil {
		return nil, fmt.Errorf("setting %s = %q is not a JSON list of role names", FenceMarker, v)
	}
	for _, n := range names {
		if n == "" {
			return nil, fmt.Errorf("setting %s = %q names an empty role", FenceMarker, v)
		}
	}
	return names, nil
}

// FormatFenceMarker writes a FenceMarker value; ParseFenceMarker reads it back.
func FormatFenceMarker(names []string) string {
	b, _ := json.Marshal(names) // a []string always marshals
	return string(b)
}

func checkRoleName(role string) error {
	switch {
	case role == "":
		return errors.New("empty role name")
	case strings.IndexByte(role, 0) >= 0:
		return fmt.Errorf("role name %q contains a NUL byte", role)
	}
	return nil
}

// setMarker writes r's marker list, or removes the setting when the list is empty. ALTER ROLE
// takes no bind parameters, so the value goes through pgx's simple-protocol literal quoting.
func setMarker(ctx context.Context, tx pgx.Tx, r fenceRole) error {
	ident := pgx.Identifier{r.name}.Sanitize()
	if len(r.marks) == 0 {
		_, err := tx.Exec(ctx, "ALTER ROLE "+ident+" RESET "+FenceMarker)
		return err
	}
	_, err := tx.Exec(ctx, "ALTER ROLE "+ident+" SET "+FenceMarker+" = $1", pgx.QueryExecModeSimpleProtocol, FormatFenceMarker(r.marks))
	return err
}

// FenceWrites stops role from writing on this server (§6.4 step 3): it takes the logins of
// role and of every non-superuser role that can act as it (its members, who can SET ROLE to
// it), then terminates every session of those roles, in every database of the server, until
// none is left, and checks the logins are still off. A login then fails with 28000 and a
// session that was open fails its next statement with 57P01; an open transaction is rolled
// back. Prepared transactions are untouched: they belong to no session.
//
// Logins are taken with ALTER ROLE … NOLOGIN, remembered in FenceMarker, in one transaction.
// Sessions are found by session user in pg_stat_activity: a member that ran SET ROLE shows
// under its own name, which is why members are fenced too. FenceWrites is idempotent. It
// refuses to fence the role it is connected as (or one that role is a member of), and a role
// that does not exist (42704), since a misnamed role would leave the real one writing.
// Memberships granted after the fence are not covered until the next FenceWrites.
//
// A call cut short (its context ends, its connection breaks) returns only once its own server
// session is gone, so its change has landed or never will (settle.go); if the server cannot
// be reached to see that, the error wraps ErrUnsettled.
func (b *Backend) FenceWrites(ctx context.Context, role string) error {
	const op = "FenceWrites"
	if err := checkRoleName(role); err != nil {
		return b.failf(op, "", "%v", err)
	}
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return b.fail(op, err)
	}
	defer conn.Release()
	self, err := currentSession(ctx, conn)
	if err != nil {
		return b.fail(op, err)
	}
	err = b.fence(ctx, conn, role, self.user)
	if cutShort(ctx, conn, err) {
		return b.settle(op, self, err)
	}
	return err
}

// fence runs the rounds of FenceWrites on conn, whose session logged in as self.
func (b *Backend) fence(ctx context.Context, conn *pgxpool.Conn, role, self string) error {
	const op = "FenceWrites"
	for round := 1; ; round++ {
		var oids []uint32
		var committed time.Time
		err := retryConcurrent(ctx, func() (err error) {
			oids, committed, err = b.takeLogins(ctx, conn.Conn(), role, self)
			return err
		})
		if err != nil {
			return err
		}
		if err := b.endSessions(ctx, conn.Conn(), role, oids, committed); err != nil {
			return err
		}
		fresh, err := b.loginsStillOff(ctx, conn.Conn(), role)
		if err != nil || fresh == "" {
			return err
		}
		if round == fenceRounds {
			return b.failf(op, "", "fence of %q did not hold after %d rounds: %s (is something granting membership or LOGIN concurrently?)", role, round, fresh)
		}
	}
}

// takeLogins makes role and its members NOLOGIN with their markers, in one transaction, and
// returns the oids whose sessions must end and when the change committed. self is the
// role conn's session logged in as.
func (b *Backend) takeLogins(ctx context.Context, conn *pgx.Conn, role, self string) ([]uint32, time.Time, error) {
	const op = "FenceWrites"
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, time.Time{}, b.fail(op, err)
	}
	defer tx.Rollback(context.Background())
	roles, err := b.fenceRoles(ctx, tx, op, role)
	if err != nil {
		return nil, time.Time{}, b.fail(op, err)
	}
	for _, r := range roles {
		if r.name == self {
			return nil, time.Time{}, b.failf(op, "", "this backend connects as %q, which is %q or can act as it: fencing it would end the fence's own session; connect as a superuser or a role outside %q", self, role, role)
		}
	}
	oids := make([]uint32, 0, len(roles))
	for _, r := range roles {
		if b.mut&mutFenceSkipMembers != 0 && !r.target {
			continue
		}
		oids = append(oids, r.oid)
		switch {
		case r.canLogin && b.mut&mutFenceSkipNologin == 0:
			if _, err := tx.Exec(ctx, "ALTER ROLE "+pgx.Identifier{r.name}.Sanitize()+" NOLOGIN"); err != nil {
				return nil, time.Time{}, b.fail(op, fmt.Errorf("taking the login of %q: %w", r.name, err))
			}
		case len(r.marks) > 0 && !slices.Contains(r.marks, role):
			// Already NOLOGIN through another fence: share it, so lifting that one does not
			// give the login back while this one stands.
		default:
			continue // NOLOGIN already, by this fence or not by a fence at all
		}
		r.marks = append(r.marks, role)
		if err := setMarker(ctx, tx, r); err != nil {
			return nil, time.Time{}, b.fail(op, fmt.Errorf("recording the fence on %q: %w", r.name, err))
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, time.Time{}, b.fail(op, err)
	}
	return oids, time.Now(), nil
}

// terminateQuery signals every client session of the given roles, other than this one, to
// end, and returns how many it found. An administrator without pg_read_all_stats sees NULL
// as the backend_type of other roles' sessions, so NULL counts as a client session (a
// walsender of the role is then ended too).
const terminateQuery = `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE usesysid = ANY($1) AND (backend_type = 'client backend' OR backend_type IS NULL) AND pid <> pg_backend_pid()`

// terminateAllQuery is the mutant that ends every non-superuser client session but its own.
const terminateAllQuery = `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE (usesysid = ANY($1) OR NOT (SELECT rolsuper FROM pg_roles WHERE oid = usesysid))
  AND (backend_type = 'client backend' OR backend_type IS NULL) AND pid <> pg_backend_pid()`

// endSessions terminates the sessions of oids until a look finds none, at least Settle after
// the logins were taken.
func (b *Backend) endSessions(ctx context.Context, conn *pgx.Conn, role string, oids []uint32, committed time.Time) error {
	const op = "FenceWrites"
	if b.mut&mutFenceSkipTerminate != 0 {
		return nil
	}
	q := terminateQuery
	if b.mut&mutFenceEndsAll != 0 {
		q = terminateAllQuery
	}
	for {
		var found int64
		if err := conn.QueryRow(ctx, q, oids).Scan(&found); err != nil {
			return b.fail(op, fmt.Errorf("terminating the sessions of %q: %w", role, err))
		}
		if found == 0 {
			settle := time.Until(committed.Add(b.opt.Settle))
			if settle <= 0 {
				return nil
			}
			if err := sleep(ctx, settle); err != nil {
				return b.fail(op, fmt.Errorf("fence of %q: logins are off but sessions may remain: %w", role, err))
			}
			continue
		}
		// pg_terminate_backend only signals; a signalled session is gone within milliseconds.
		// (Its timeout argument would wait for each exit in turn, polling every 100ms.)
		if err := sleep(ctx, 2*time.Millisecond); err != nil {
			return b.fail(op, fmt.Errorf("fence of %q: logins are off but %d sessions remained: %w", role, found, err))
		}
	}
}

// loginsStillOff re-reads the roles after the sessions ended. It returns "" when role and
// every member are NOLOGIN, and otherwise which ones can log in (a membership granted or a
// LOGIN given back while the fence ran), for another round.
func (b *Backend) loginsStillOff(ctx context.Context, conn *pgx.Conn, role string) (string, error) {
	const op = "FenceWrites"
	if b.mut&(mutFenceSkipNologin|mutFenceSkipMembers) != 0 {
		return "", nil
	}
	roles, err := b.fenceRoles(ctx, conn, op, role)
	if err != nil {
		return "", b.fail(op, err)
	}
	var open []string
	for _, r := range roles {
		if r.canLogin {
			open = append(open, r.name)
		}
	}
	if len(open) == 0 {
		return "", nil
	}
	return fmt.Sprintf("roles %q can log in", open), nil
}

// UnfenceWrites gives back the logins the fences of role took: role's own, and each member's
// once no other fence that took it stands. A role that was NOLOGIN before the fence stays
// so. Idempotent; a role that does not exist is an error (42704). Like FenceWrites, a call cut
// short returns only once its server session is gone.
func (b *Backend) UnfenceWrites(ctx context.Context, role string) error {
	const op = "UnfenceWrites"
	if err := checkRoleName(role); err != nil {
		return b.failf(op, "", "%v", err)
	}
	if b.mut&mutUnfenceNoop != 0 {
		return nil
	}
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return b.fail(op, err)
	}
	defer conn.Release()
	self, err := currentSession(ctx, conn)
	if err != nil {
		return b.fail(op, err)
	}
	err = retryConcurrent(ctx, func() error { return b.unfence(ctx, conn, role) })
	if cutShort(ctx, conn, err) {
		return b.settle(op, self, err)
	}
	return err
}

func (b *Backend) unfence(ctx context.Context, conn *pgxpool.Conn, role string) error {
	const op = "UnfenceWrites"
	tx, err := conn.Begin(ctx)
	if err != nil {
		return b.fail(op, err)
	}
	defer tx.Rollback(context.Background())
	roles, err := b.readRoles(ctx, tx, op, role, unfenceRolesQuery)
	if err != nil {
		return b.fail(op, err)
	}
	for _, r := range roles {
		i := slices.Index(r.marks, role)
		if i < 0 {
			continue
		}
		r.marks = slices.Delete(r.marks, i, i+1)
		if len(r.marks) == 0 {
			if _, err := tx.Exec(ctx, "ALTER ROLE "+pgx.Identifier{r.name}.Sanitize()+" LOGIN"); err != nil {
				return b.fail(op, fmt.Errorf("giving back the login of %q: %w", r.name, err))
			}
		}
		if err := setMarker(ctx, tx, r); err != nil {
			return b.fail(op, fmt.Errorf("updating the fence record on %q: %w", r.name, err))
		}
	}
	return b.fail(op, tx.Commit(ctx))
}

// concurrentTries bounds how many times a fence's or an unfence's transaction is run again
// after losing a race on the role's catalog row.
const concurrentTries = 10

// retryConcurrent runs f again while it fails with "tuple concurrently updated" (XX000): two
// fences of one role on one server (two shards' databases, fenced at once by a cutover) both
// ALTER ROLE the same catalog row, and the one that waited for the other's commit fails
// instead of seeing it. The winner has committed by then, so running the transaction again
// at once reads what it did (the role NOLOGIN, its marker) and does the rest, or nothing: the
// change is idempotent. Without this the loser's caller retried after its own delay, and a
// cutover's pause waited for it.
func retryConcurrent(ctx context.Context, f func() error) error {
	for try := 1; ; try++ {
		err := f()
		if err == nil || try == concurrentTries || !concurrentlyUpdated(err) {
			return err
		}
		if serr := sleep(ctx, time.Duration(try)*time.Millisecond); serr != nil {
			return errors.Join(err, serr)
		}
	}
}

// concurrentlyUpdated reports Postgres's "tuple concurrently updated": a catalog row
// changed by another transaction that committed while this one waited for it.
func concurrentlyUpdated(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "XX000" && strings.Contains(pe.Message, "concurrently updated")
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
