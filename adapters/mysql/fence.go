package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strconv"
	"time"
)

// FenceTable is the table, in Options.FenceSchema, through which a fence remembers which
// accounts it locked: one row (user, host) per account. UnfenceWrites unlocks exactly those,
// so an account that was locked before the fence (by an operator, or one that never logs
// in) stays locked. The row is written before the lock and removed after the unlock, so a
// crash between the two leaves a row for an unlocked account (harmless: the next unfence
// removes it), never a locked account without its row. Like the lock, it is kept out of the
// binary log unless Options.Binlog.
const FenceTable = "fenced_accounts"

// fenceRounds bounds how many times FenceWrites locks and kills before it gives up: each
// round ends with a check, and a round repeats only when something changed underneath (an
// account of the user created or unlocked while the fence ran).
const fenceRounds = 5

// account is one user@host of the fenced user.
type account struct {
	host   string
	locked bool
}

// accountsQuery lists the accounts of a user with their lock state. MariaDB keeps the lock in
// mysql.global_priv's JSON (account_locked, absent when never locked) and lists roles there
// too; MySQL has mysql.user.account_locked.
func (b *Backend) accountsQuery() string {
	if b.flavor == MySQL {
		return "SELECT Host, account_locked = 'Y' FROM mysql.user WHERE User = ? ORDER BY Host"
	}
	return `SELECT Host, COALESCE(JSON_VALUE(Priv, '$.account_locked'), 0) <> 0 FROM mysql.global_priv
WHERE User = ? AND COALESCE(JSON_VALUE(Priv, '$.is_role'), 0) = 0 ORDER BY Host`
}

func (b *Backend) accounts(ctx context.Context, conn *sql.Conn, op, user string) ([]account, error) {
	rows, err := conn.QueryContext(ctx, b.accountsQuery(), user)
	if err != nil {
		return nil, b.fail(op, fmt.Errorf("reading the accounts of %q: %w", user, err))
	}
	defer rows.Close()
	var out []account
	for rows.Next() {
		var a account
		if err := rows.Scan(&a.host, &a.locked); err != nil {
			return nil, b.fail(op, err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, b.fail(op, err)
	}
	if len(out) == 0 {
		return nil, b.failf(op, CodeCannotUser, "user %q has no account on this server (check the application user's name: fencing a wrong name would leave the real one writing)", user)
	}
	return out, nil
}

// fenceConn takes a connection of its own for a fence or unfence, with the binary log off for
// it unless Options.Binlog. It is discarded afterwards, not pooled, so no session setting
// outlives the call.
func (b *Backend) fenceConn(ctx context.Context, op string) (*sql.Conn, error) {
	conn, err := b.db.Conn(ctx)
	if err != nil {
		return nil, b.fail(op, err)
	}
	if !b.opt.Binlog && b.mut&mutFenceBinlogged == 0 {
		if _, err := conn.ExecContext(ctx, "SET SESSION sql_log_bin = 0"); err != nil {
			discard(conn)
			return nil, b.fail(op, fmt.Errorf("keeping the fence out of the binary log (SET sql_log_bin = 0 needs BINLOG ADMIN on MariaDB, SYSTEM_VARIABLES_ADMIN on MySQL; or set Options.Binlog): %w", err))
		}
	}
	return conn, nil
}

// discard closes conn's physical connection instead of returning it to the pool.
func discard(conn *sql.Conn) {
	conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
}

// FenceWrites stops user from writing on this server (the cutover's and the failover's
// fence): it locks every account of the user (ALTER USER user@host ACCOUNT LOCK, every
// host), then kills every connection of the user (KILL CONNECTION, found by name in
// information_schema.PROCESSLIST) until none is left, and checks the accounts are still
// locked. A new login then fails with 4151 (MySQL: 3118); a connection that was open is
// gone, so its next statement fails with a lost connection and its open transaction is
// rolled back (ClassifySession tells that apart from other lost connections). Binlog dump
// threads of replicas that log in as the user are left running, as the Postgres fence leaves
// walsenders; XA branches prepared by the user's sessions stay prepared (they outlive their
// sessions).
//
// FenceWrites records each account it locks in FenceTable (UnfenceWrites gives back only
// those) and is idempotent. It refuses a user with no account (code 1396) and the user it
// is connected as, and it refuses to run without the PROCESS privilege, without which the
// process list would hide the sessions it must end. Accounts of the user created after it
// returns are not covered until the next FenceWrites.
//
// A call cut short (its context ends, its connection breaks) returns only once its own server
// connection is gone, so its change has landed or never will (settle.go); if the server
// cannot be reached to see that, the error wraps ErrUnsettled.
func (b *Backend) FenceWrites(ctx context.Context, user string) error {
	const op = "FenceWrites"
	return b.settled(ctx, op, user, b.fence)
}

// UnfenceWrites unlocks the accounts of user that fences locked (FenceTable) and forgets
// them. Accounts locked before the fence stay locked. Idempotent; a user with no account is
// an error (1396). Like FenceWrites, a call cut short returns only once its server connection
// is gone.
func (b *Backend) UnfenceWrites(ctx context.Context, user string) error {
	const op = "UnfenceWrites"
	if b.mut&mutUnfenceNoop != 0 {
		return checkName("user", user)
	}
	return b.settled(ctx, op, user, b.unfence)
}

// settled runs f for user on a fence connection and settles it when cut short.
func (b *Backend) settled(ctx context.Context, op, user string, f func(context.Context, *sql.Conn, string) error) error {
	if err := checkName("user", user); err != nil {
		return b.failf(op, "", "%v", err)
	}
	conn, err := b.fenceConn(ctx, op)
	if err != nil {
		return err
	}
	defer discard(conn)
	self, err := b.currentSession(ctx, conn)
	if err != nil {
		return b.fail(op, err)
	}
	err = f(ctx, conn, user)
	if cutShort(ctx, err) {
		return b.settle(op, self, err)
	}
	return err
}

// checkFencer refuses to fence the user the Backend is connected as (the fence would kill
// its own connections and lock itself out), and a connection without PROCESS, which sees
// only its own threads in the process list and would find no session to end.
func (b *Backend) checkFencer(ctx context.Context, conn *sql.Conn, op, user string) error {
	var current string
	if err := conn.QueryRowContext(ctx, "SELECT CURRENT_USER()").Scan(&current); err != nil {
		return b.fail(op, err)
	}
	self, host, err := splitAccount(current)
	if err != nil {
		return b.failf(op, "", "%v", err)
	}
	if self == user {
		return b.failf(op, "", "this backend connects as %q, the user to fence: the fence would kill its own connections; connect as an administrator of another name", current)
	}
	var n int
	grantee := "'" + self + "'@'" + host + "'"
	if err := conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.USER_PRIVILEGES
WHERE GRANTEE = ? AND PRIVILEGE_TYPE = 'PROCESS'`, grantee).Scan(&n); err != nil {
		return b.fail(op, err)
	}
	if n == 0 {
		return b.failf(op, "", "%s lacks the global PROCESS privilege (granted to the account itself, not through a role): without it the process list hides other users' connections and the fence could not find them (GRANT PROCESS ON *.* TO %s)", current, current)
	}
	return nil
}

// ensureFenceTable creates the fence record's database and table if they are missing.
func (b *Backend) ensureFenceTable(ctx context.Context, conn *sql.Conn, op string) error {
	schema := QuoteIdent(b.opt.FenceSchema)
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS " + schema,
		"CREATE TABLE IF NOT EXISTS " + schema + "." + QuoteIdent(FenceTable) + ` (
  user VARBINARY(512) NOT NULL,
  host VARBINARY(1020) NOT NULL,
  fenced_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (user, host)
) ENGINE = InnoDB`,
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return b.fail(op, fmt.Errorf("creating the fence record %s.%s: %w", b.opt.FenceSchema, FenceTable, err))
		}
	}
	return nil
}

func (b *Backend) fenceTable() string {
	return QuoteIdent(b.opt.FenceSchema) + "." + QuoteIdent(FenceTable)
}

// fence runs the rounds of FenceWrites on conn.
func (b *Backend) fence(ctx context.Context, conn *sql.Conn, user string) error {
	const op = "FenceWrites"
	if err := b.checkFencer(ctx, conn, op, user); err != nil {
		return err
	}
	if err := b.ensureFenceTable(ctx, conn, op); err != nil {
		return err
	}
	for round := 1; ; round++ {
		locked, err := b.lockAccounts(ctx, conn, user)
		if err != nil {
			return err
		}
		if err := b.killSessions(ctx, conn, user, locked); err != nil {
			return err
		}
		open, err := b.accountsStillLocked(ctx, conn, user)
		if err != nil || len(open) == 0 {
			return err
		}
		if round == fenceRounds {
			return b.failf(op, "", "fence of %q did not hold after %d rounds: accounts %q can log in (is something creating or unlocking accounts of the user concurrently?)", user, round, open)
		}
	}
}

// lockAccounts locks every unlocked account of user, recording each first, and returns when
// the last lock was done.
func (b *Backend) lockAccounts(ctx context.Context, conn *sql.Conn, user string) (time.Time, error) {
	const op = "FenceWrites"
	accts, err := b.accounts(ctx, conn, op, user)
	if err != nil {
		return time.Time{}, err
	}
	for _, a := range accts {
		if a.locked || b.mut&mutFenceSkipLock != 0 {
			continue // locked by an earlier fence (recorded), or by someone else (left alone)
		}
		if b.mut&mutFenceOneHost != 0 && a.host != "%" {
			continue
		}
		if _, err := conn.ExecContext(ctx, "INSERT INTO "+b.fenceTable()+" (user, host) VALUES (?, ?) ON DUPLICATE KEY UPDATE fenced_at = fenced_at", user, a.host); err != nil {
			return time.Time{}, b.fail(op, fmt.Errorf("recording the fence of %s: %w", quoteAccount(user, a.host), err))
		}
		if _, err := conn.ExecContext(ctx, "ALTER USER "+quoteAccount(user, a.host)+" ACCOUNT LOCK"); err != nil {
			return time.Time{}, b.fail(op, fmt.Errorf("locking %s: %w", quoteAccount(user, a.host), err))
		}
	}
	return time.Now(), nil
}

// sessionsQuery finds the connections of a user other than this one, binlog dump threads
// aside, and says which are still logging in (command Connect, or state login once killed):
// a login the lock refuses shows under the user's name until its thread ends, and a fenced
// server under a reconnect storm always has some. They are killed with the rest but are not
// waited for: they cannot write, and a login that passed its check just before the lock
// finishes logging in within the settle time and is then waited for like any session.
const sessionsQuery = `SELECT ID, COMMAND = 'Connect' OR COALESCE(STATE, '') = 'login' FROM information_schema.PROCESSLIST
WHERE USER = ? AND ID <> CONNECTION_ID() AND COMMAND NOT LIKE 'Binlog Dump%'`

// sessionsAllQuery is the mutant that finds every client connection but its own.
const sessionsAllQuery = `SELECT ID, COMMAND = 'Connect' OR COALESCE(STATE, '') = 'login' FROM information_schema.PROCESSLIST
WHERE (USER = ? OR USER NOT IN ('system user', 'event_scheduler', SUBSTRING_INDEX(CURRENT_USER(), '@', 1)))
  AND ID <> CONNECTION_ID() AND COMMAND NOT LIKE 'Binlog Dump%'`

// killSessions kills the connections of user until a look finds none, at least Settle after
// the accounts were locked.
func (b *Backend) killSessions(ctx context.Context, conn *sql.Conn, user string, locked time.Time) error {
	const op = "FenceWrites"
	if b.mut&mutFenceSkipKill != 0 {
		return nil
	}
	q := sessionsQuery
	if b.mut&mutFenceKillsAll != 0 {
		q = sessionsAllQuery
	}
	for {
		ids, sessions, err := listSessions(ctx, conn, q, user)
		if err != nil {
			return b.fail(op, fmt.Errorf("listing the connections of %q: %w", user, err))
		}
		for _, id := range ids {
			if err := kill(ctx, conn, id); err != nil {
				return b.fail(op, fmt.Errorf("fence of %q: killing connection %d (KILL needs CONNECTION ADMIN on MariaDB, CONNECTION_ADMIN on MySQL): %w", user, id, err))
			}
		}
		if sessions == 0 {
			settle := time.Until(locked.Add(b.opt.Settle))
			if settle <= 0 {
				return nil
			}
			if err := sleep(ctx, settle); err != nil {
				return b.fail(op, fmt.Errorf("fence of %q: accounts are locked but connections may remain: %w", user, err))
			}
			continue
		}
		// A killed connection leaves the process list once its thread notices, within
		// milliseconds (at once when idle); look again shortly.
		if err := sleep(ctx, 2*time.Millisecond); err != nil {
			return b.fail(op, fmt.Errorf("fence of %q: accounts are locked but %d connections remained: %w", user, sessions, err))
		}
	}
}

// listSessions runs a sessions query and returns the ids to kill and how many of them are
// sessions (not logins in progress).
func listSessions(ctx context.Context, conn *sql.Conn, q, user string) (ids []uint64, sessions int, err error) {
	rows, err := conn.QueryContext(ctx, q, user)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var id uint64
		var login bool
		if err := rows.Scan(&id, &login); err != nil {
			return nil, 0, err
		}
		ids = append(ids, id)
		if !login {
			sessions++
		}
	}
	return ids, sessions, rows.Err()
}

// kill ends connection id; one that is already gone is fine. KILL takes no bind parameter;
// id is a number read from the server.
func kill(ctx context.Context, conn *sql.Conn, id uint64) error {
	_, err := conn.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatUint(id, 10))
	if Code(err) == CodeUnknownThread {
		return nil
	}
	return err
}

// accountsStillLocked re-reads the accounts after the connections ended and returns those
// that can log in (created or unlocked while the fence ran), for another round.
func (b *Backend) accountsStillLocked(ctx context.Context, conn *sql.Conn, user string) ([]string, error) {
	if b.mut&(mutFenceSkipLock|mutFenceOneHost) != 0 {
		return nil, nil
	}
	accts, err := b.accounts(ctx, conn, "FenceWrites", user)
	if err != nil {
		return nil, err
	}
	var open []string
	for _, a := range accts {
		if !a.locked {
			open = append(open, user+"@"+a.host)
		}
	}
	return open, nil
}

// unfence unlocks the recorded accounts of user and removes their records.
func (b *Backend) unfence(ctx context.Context, conn *sql.Conn, user string) error {
	const op = "UnfenceWrites"
	accts, err := b.accounts(ctx, conn, op, user)
	if err != nil {
		return err
	}
	q := "SELECT host FROM " + b.fenceTable() + " WHERE user = ?"
	if b.mut&mutUnfenceAll != 0 {
		q = "SELECT Host FROM mysql.user WHERE User = ?"
	}
	rows, err := conn.QueryContext(ctx, q, user)
	if Code(err) == CodeNoSuchTable {
		return nil // no fence has ever run here
	}
	if err != nil {
		return b.fail(op, fmt.Errorf("reading the fence record: %w", err))
	}
	var hosts []string
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			rows.Close()
			return b.fail(op, err)
		}
		hosts = append(hosts, h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return b.fail(op, err)
	}
	for _, h := range hosts {
		exists := false
		for _, a := range accts {
			exists = exists || a.host == h
		}
		if exists {
			if _, err := conn.ExecContext(ctx, "ALTER USER "+quoteAccount(user, h)+" ACCOUNT UNLOCK"); err != nil {
				return b.fail(op, fmt.Errorf("unlocking %s: %w", quoteAccount(user, h), err))
			}
		}
		if b.mut&mutUnfenceAll != 0 {
			continue
		}
		if _, err := conn.ExecContext(ctx, "DELETE FROM "+b.fenceTable()+" WHERE user = ? AND host = ?", user, h); err != nil {
			return b.fail(op, fmt.Errorf("removing the fence record of %s: %w", quoteAccount(user, h), err))
		}
	}
	return nil
}

// FencedAccounts lists the accounts of user that a fence locked and has not unlocked
// ("user@host"), from FenceTable: what UnfenceWrites would unlock.
func (b *Backend) FencedAccounts(ctx context.Context, user string) ([]string, error) {
	const op = "FencedAccounts"
	rows, err := b.db.QueryContext(ctx, "SELECT host FROM "+b.fenceTable()+" WHERE user = ? ORDER BY host", user)
	if Code(err) == CodeNoSuchTable {
		return nil, nil
	}
	if err != nil {
		return nil, b.fail(op, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			return nil, b.fail(op, err)
		}
		out = append(out, user+"@"+h)
	}
	return out, b.fail(op, rows.Err())
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
