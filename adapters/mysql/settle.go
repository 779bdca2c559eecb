package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// A fence or unfence that fails half way must not take effect later. When a call is cut
// short (its context ends, or its connection breaks) after it sent ALTER USER, the server
// can still be running that statement: go-sql-driver/mysql closes the connection when the
// context ends and sends no KILL QUERY, and a server that does not see the close (a
// partition swallowed it, or the thread is waiting on a lock and checks its socket only
// now and then) carries on. A cutover or failover that took the error at its word would
// then unfence or move on while a late ACCOUNT LOCK lands, or the other way round. So before
// such a call returns its error, settle kills the call's own connection on the server (KILL
// CONNECTION) and waits until its thread is gone from the process list: from then on the
// call's statements have finished or never will, which is the answer contract of the
// machines' commands. The connection is identified by its id and the server's boot time, so
// an id reused after a restart is never killed.

// SettleTimeout bounds how long a failed call waits for its server connection to end.
const SettleTimeout = 10 * time.Second

// ErrUnsettled marks a failed fence or unfence whose server connection could not be seen to
// end (the server is unreachable): the change it sent may still take effect. Treat the
// shard's fence state as unknown and read it again before acting on it.
var ErrUnsettled = errors.New("the call's server connection could not be seen to end; its change may still take effect")

// session is the identity of one server connection.
type session struct {
	id   uint64
	boot time.Time // when the server started, to the second
}

// bootTime reads when the server started: now minus Uptime.
func bootTime(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (time.Time, error) {
	var name, uptime string
	if err := q.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Uptime'").Scan(&name, &uptime); err != nil {
		return time.Time{}, err
	}
	secs, err := strconv.ParseInt(uptime, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("Uptime %q is not a number of seconds", uptime)
	}
	return time.Now().Add(-time.Duration(secs) * time.Second), nil
}

func (b *Backend) currentSession(ctx context.Context, conn *sql.Conn) (session, error) {
	var s session
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&s.id); err != nil {
		return s, err
	}
	boot, err := bootTime(ctx, conn)
	s.boot = boot
	return s, err
}

// cutShort reports whether err means the call stopped with its statement possibly still
// running on the server: its context ended or its connection is gone.
func cutShort(ctx context.Context, err error) bool {
	return err != nil && (ctx.Err() != nil || errors.Is(err, context.Canceled) ||
		errors.Is(err, context.DeadlineExceeded) || IsConnLost(err))
}

// settle kills s on the server and waits until it is gone, then returns err unchanged; if it
// cannot see s end within SettleTimeout it returns err joined with ErrUnsettled.
func (b *Backend) settle(op string, s session, err error) error {
	if b.mut&mutNoSettle != 0 {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), SettleTimeout)
	defer cancel()
	unsettled := func(why string, a ...any) error {
		return errors.Join(err, b.failf(op, "", "%w (connection %d): %s", ErrUnsettled, s.id, fmt.Sprintf(why, a...)))
	}
	for {
		conn, cerr := b.db.Conn(ctx)
		if cerr != nil {
			return unsettled("%v", cerr)
		}
		gone, qerr := b.settleOnce(ctx, conn, s)
		conn.Close()
		if qerr != nil && !IsConnLost(qerr) {
			return unsettled("%v", qerr)
		}
		if qerr == nil && gone {
			return err
		}
		if serr := sleep(ctx, 2*time.Millisecond); serr != nil {
			if qerr != nil {
				return unsettled("%v", qerr)
			}
			return unsettled("still running after %v", SettleTimeout)
		}
	}
}

// settleOnce kills s if it still runs and reports whether it is gone.
func (b *Backend) settleOnce(ctx context.Context, conn *sql.Conn, s session) (bool, error) {
	boot, err := bootTime(ctx, conn)
	if err != nil {
		return false, err
	}
	if d := boot.Sub(s.boot); d > 2*time.Second || d < -2*time.Second {
		return true, nil // the server restarted: every connection of before is gone
	}
	var n int
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", s.id).Scan(&n); err != nil {
		return false, err
	}
	if n == 0 {
		return true, nil
	}
	return false, kill(ctx, conn, s.id)
}
