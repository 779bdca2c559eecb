package mysql

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/go-sql-driver/mysql"

	"loam.dev/router/adapters"
)

// MySQL and MariaDB error numbers this package branches on, as adapters.BackendError.Code
// carries them (decimal text).
const (
	// CodeAccountLocked is MariaDB's ER_ACCOUNT_HAS_BEEN_LOCKED: a login of a locked account
	// ("Access denied, this account is locked"). The fence's refusal.
	CodeAccountLocked = "4151"
	// CodeAccountLockedMySQL is MySQL's number for the same refusal ("Access denied for user
	// … Account is locked").
	CodeAccountLockedMySQL = "3118"
	// CodeCannotUser (ER_CANNOT_USER) is an account that does not exist.
	CodeCannotUser = "1396"
	// CodeNoSuchTable (ER_NO_SUCH_TABLE) is a table that does not exist.
	CodeNoSuchTable = "1146"
	// CodeUnknownThread (ER_NO_SUCH_THREAD) is a KILL of a connection that is gone.
	CodeUnknownThread = "1094"
	// CodeReadOnly (ER_OPTION_PREVENTS_STATEMENT) is a write refused under read_only (or
	// super_read_only).
	CodeReadOnly = "1290"
	// CodeConnectionKilled (MariaDB's ER_CONNECTION_KILLED) is sent by some servers to a
	// session killed in the middle of a statement. It says the session was killed, not by
	// whom, so it counts as a lost connection.
	CodeConnectionKilled = "1927"
)

// Code returns the MySQL error number of the server error in err's chain, or "" when there
// is none: the connection failed or was killed (a killed connection sends no number; the
// driver reports mysql.ErrInvalidConn or driver.ErrBadConn), the context ended, ...
func Code(err error) string {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return strconv.Itoa(int(me.Number))
	}
	return ""
}

// IsFenceError reports whether err is a login refused because the account is locked: the
// fence, as a new login sees it (MariaDB 4151, MySQL 3118). A session the fence killed gets
// no error number at all; see IsConnLost and ClassifySession.
func IsFenceError(err error) bool {
	switch Code(err) {
	case CodeAccountLocked, CodeAccountLockedMySQL:
		return true
	}
	return false
}

// IsConnLost reports whether err means the session's connection is gone: what a session
// killed by the fence (KILL CONNECTION) gets, and equally what a network failure or a
// server restart gives. The statement it carried may or may not have run.
func IsConnLost(err error) bool {
	return errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn) || Code(err) == CodeConnectionKilled
}

// Classify turns an error from a go-sql-driver/mysql call made against backend (host:port)
// for op into an *adapters.BackendError keeping the MySQL error number, marked Fenced when
// IsFenceError says so, so errors.Is(err, adapters.ErrFenced) holds for a login the fence
// refused. A lost connection is not marked: on its own it does not say who ended it (use
// ClassifySession). A connection that could not be opened matches adapters.ErrUnreachable
// (nothing was sent). The original error stays in the chain. nil stays nil, and an error that
// already is an *adapters.BackendError is returned as it is.
func Classify(backend, op string, err error) error {
	if err == nil {
		return nil
	}
	var be *adapters.BackendError
	if errors.As(err, &be) {
		return err
	}
	code := Code(err)
	if isDialError(err) {
		err = fmt.Errorf("%w: %w", adapters.ErrUnreachable, err)
	}
	return &adapters.BackendError{Backend: backend, Op: op, Code: code, Err: err, Fenced: IsFenceError(err)}
}

// isDialError reports whether err is a failure to open a connection: nothing was sent.
func isDialError(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// ClassifySession is Classify for an application session's error, telling a session the
// fence killed from one lost to anything else. A killed connection carries no error number,
// so when err is a lost connection ClassifySession logs in once more through relogin (a
// connector for the same account, e.g. mysql.NewConnector of the session's config): if that
// login is refused because the account is locked, the session ended under the fence, and the
// error is marked Fenced (Code stays "": the server sent none). If the login succeeds, or
// fails otherwise, the error is not the fence's. A nil relogin makes it Classify.
func ClassifySession(ctx context.Context, backend, op string, err error, relogin driver.Connector) error {
	if err == nil || relogin == nil || !IsConnLost(err) {
		return Classify(backend, op, err)
	}
	var be *adapters.BackendError
	if errors.As(err, &be) {
		return err
	}
	c, lerr := relogin.Connect(ctx)
	if lerr == nil {
		c.Close()
		return &adapters.BackendError{Backend: backend, Op: op, Code: Code(err),
			Err: fmt.Errorf("%w (a new login of the same account succeeded: the session was not ended by a fence)", err)}
	}
	if IsFenceError(lerr) {
		return &adapters.BackendError{Backend: backend, Op: op, Code: Code(err), Fenced: true,
			Err: fmt.Errorf("%w (the session's connection was ended, and a new login is refused because the account is locked [%s]: the shard is fenced)", err, Code(lerr))}
	}
	return &adapters.BackendError{Backend: backend, Op: op, Code: Code(err),
		Err: fmt.Errorf("%w (a new login to check for a fence failed too: %v)", err, lerr)}
}
