package pgdog

import (
	"errors"
	"fmt"
)

// Sentinel errors, matched with errors.Is through the *adapters.RouterError every method
// returns.
var (
	// ErrSyntax: PgDog could not parse the command (a non-fatal ErrorResponse, SQLSTATE
	// 08P01, "syntax error in admin command"). The connection stays usable.
	ErrSyntax = errors.New("pgdog: the admin database did not understand the command")
	// ErrExecution: PgDog parsed the command but running it failed (pgdog.md: a FATAL
	// ErrorResponse, SQLSTATE 58000, after which PgDog closes the admin connection;
	// marked unconfirmed there). Examples: RELOAD of a file that does not parse, CUTOVER
	// with nothing to cut over. The adapter reconnects for the next command.
	ErrExecution = errors.New("pgdog: the admin command failed")
	// ErrName: a name the adapter refuses to send (see CheckName): PgDog would lowercase
	// it or split it, and act on another object than the one meant.
	ErrName = errors.New("pgdog: name cannot be sent to the admin database")
	// ErrReply: the reply does not have the shape pgdog.md documents for the command
	// (a missing column, a value that does not parse, an unexpected tag).
	ErrReply = errors.New("pgdog: unexpected reply from the admin database")
	// ErrLogin: the admin database refused the login (SQLSTATE class 28). PgDog answers a
	// wrong admin password with FATAL 28000 "password for user ... is wrong, or the
	// database does not exist" (recorded), not Postgres's 28P01: match this, not a code.
	// The instance answered, so this is never adapters.ErrUnreachable; retrying does not
	// help until Config.Admin's password is fixed.
	ErrLogin = errors.New("pgdog: the admin database refused the login")
	// ErrNotLoaded: RELOAD succeeded but SHOW POOLS does not show the generation marker of
	// the files Apply wrote: the instance reads files from elsewhere (its --config and
	// --users are not in Config.Dir), or something rewrote them.
	ErrNotLoaded = errors.New("pgdog: the instance did not load the generation it was given")
)

// CommandError is PgDog's ErrorResponse to an admin command, with its SQLSTATE.
type CommandError struct {
	Command  string // the command as sent
	Severity string // ERROR or FATAL
	Code     string
	Message  string
}

func (e *CommandError) Error() string {
	what := "failed"
	switch {
	case e.Code == codeSyntax:
		what = "was not understood (check the command against pgdog.md)"
	case e.Severity == "FATAL":
		what = "failed and PgDog closed the admin connection"
	}
	return fmt.Sprintf("pgdog: %q %s: %s: %s (SQLSTATE %s)", e.Command, what, e.Severity, e.Message, e.Code)
}

// Is makes errors.Is match ErrSyntax for SQLSTATE 08P01 and ErrExecution for FATAL errors.
func (e *CommandError) Is(target error) bool {
	return target == ErrSyntax && e.Code == codeSyntax || target == ErrExecution && e.Severity == "FATAL"
}

const codeSyntax = "08P01"

// NameError says why a name cannot be sent.
type NameError struct {
	Kind   string // "database", "publication", ...
	Name   string
	Reason string
}

func (e *NameError) Error() string {
	return fmt.Sprintf("pgdog: %s name %q %s", e.Kind, e.Name, e.Reason)
}

// Is makes errors.Is(err, ErrName) true.
func (e *NameError) Is(target error) bool { return target == ErrName }
