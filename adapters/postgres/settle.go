package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// A fence or unfence that fails half way must not take effect later. When a call is cut
// short (its context ends, or its connection breaks) after it sent ALTER ROLE, the server
// can still be running that statement or its COMMIT: pgx closes the connection and sends a
// cancel request, but nothing waits for the server's backend to finish. A cutover that
// took the error at its word would then unfence and resume while a late NOLOGIN lands, or
// the other way round. So before such a call returns its error, settle ends the call's own
// server backend (pg_terminate_backend) and waits until it is gone: from then on the call
// has either committed or never will, which is the answer contract of the cutover's
// commands. The backend is identified by pid and start time, so a reused pid is never
// signalled.

// SettleTimeout bounds how long a failed call waits for its server backend to end.
const SettleTimeout = 10 * time.Second

// ErrUnsettled marks a failed fence or unfence whose server backend could not be seen to end
// (the server is unreachable): the change it sent may still take effect. Treat the shard's
// fence state as unknown and read it again before acting on it.
var ErrUnsettled = errors.New("the call's server session could not be seen to end; its change may still take effect")

// session is the identity of one server backend, and the role it logged in as (fixed for
// the session: FenceWrites reads it here, in the same round trip, not again in each round).
type session struct {
	pid   uint32
	start time.Time
	user  string
}

func currentSession(ctx context.Context, conn *pgxpool.Conn) (session, error) {
	var s session
	err := conn.QueryRow(ctx, "SELECT pg_backend_pid(), backend_start, session_user::text FROM pg_stat_activity WHERE pid = pg_backend_pid()").Scan(&s.pid, &s.start, &s.user)
	return s, err
}

// cutShort reports whether err means the call stopped with its statement possibly still
// running on the server: its context ended or its connection is gone.
func cutShort(ctx context.Context, conn *pgxpool.Conn, err error) bool {
	return err != nil && (ctx.Err() != nil || conn.Conn().IsClosed() ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

// settle ends s on the server and waits until it is gone, then returns err unchanged; if it
// cannot see s end within SettleTimeout it returns err joined with ErrUnsettled.
func (b *Backend) settle(op string, s session, err error) error {
	if b.mut&mutNoSettle != 0 {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), SettleTimeout)
	defer cancel()
	for {
		// One row while the session lives (signalled again each time), none once it is gone.
		var alive int
		qerr := b.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid))::int FROM pg_stat_activity
WHERE pid = $1 AND backend_start = $2`, s.pid, s.start).Scan(&alive)
		if qerr != nil {
			return errors.Join(err, b.fail(op, fmt.Errorf("%w (pid %d): %v", ErrUnsettled, s.pid, qerr)))
		}
		if alive == 0 {
			return err
		}
		if serr := sleep(ctx, 2*time.Millisecond); serr != nil {
			return errors.Join(err, b.fail(op, fmt.Errorf("%w (pid %d still running after %v)", ErrUnsettled, s.pid, SettleTimeout)))
		}
	}
}
