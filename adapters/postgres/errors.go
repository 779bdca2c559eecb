package postgres

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"loam.dev/router/adapters"
)

// SQLSTATEs this package branches on. The fence's two are the ones an application sees
// (reference/postgres.md §4).
const (
	// CodeLoginRefused (invalid_authorization_specification) is what a login of a NOLOGIN
	// role gets: FATAL role "app" is not permitted to log in.
	CodeLoginRefused = "28000"
	// CodeTerminated (admin_shutdown) is what a session ended by pg_terminate_backend gets on
	// its running or next statement: FATAL terminating connection due to administrator
	// command.
	CodeTerminated = "57P01"
	// CodeUndefinedObject is a role (or prepared transaction) that does not exist.
	CodeUndefinedObject = "42704"
	// CodeUndefinedTable is a table that does not exist.
	CodeUndefinedTable = "42P01"
)

// Code returns the SQLSTATE of the Postgres error in err's chain, or "" when there is none
// (the connection failed below the protocol, the context ended, ...).
func Code(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// IsFenceError reports whether err is the backend fence refusing: a login refused because
// the role may not log in (28000), or a session the fence terminated (57P01).
//
// 28000 is also the code of other login refusals (no pg_hba.conf entry, a role that does not
// exist); only the NOLOGIN one counts, recognised by its message or, when lc_messages
// translates the message, by the routine that raised it. 57P01 cannot be told apart from
// the session ending because the server shut down (fast shutdown sends the same message):
// both count, and a fenced server is then recognised by the 28000 of the next login.
func IsFenceError(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case CodeTerminated:
		return true
	case CodeLoginRefused:
		if strings.Contains(pe.Message, "is not permitted to log in") {
			return true
		}
		// InitializeSessionUserId raises both "not permitted to log in" and "role does not
		// exist"; a translated message is read by the routine, minus the other refusal.
		return pe.Routine == "InitializeSessionUserId" && !strings.Contains(pe.Message, "does not exist")
	}
	return false
}

// Classify turns an error from a pgx call made against backend (host:port) for op into an
// *adapters.BackendError keeping the SQLSTATE, marked Fenced when IsFenceError says so, so
// errors.Is(err, adapters.ErrFenced) holds exactly for fence refusals. Routers and clients
// use it on their own sessions' errors to branch the way the control plane does. The
// original error stays in the chain (errors.Is(err, context.Canceled) still works). nil
// stays nil, and an error that already is an *adapters.BackendError is returned as it is.
func Classify(backend, op string, err error) error {
	if err == nil {
		return nil
	}
	var be *adapters.BackendError
	if errors.As(err, &be) {
		return err
	}
	return &adapters.BackendError{Backend: backend, Op: op, Code: Code(err), Err: err, Fenced: IsFenceError(err)}
}
