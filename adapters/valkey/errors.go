package valkey

import (
	"errors"
	"fmt"
	"strings"

	valkeygo "github.com/valkey-io/valkey-go"
)

// Sentinel errors a caller can branch on with errors.Is.
var (
	// ErrCrossSlot: the keys of one call map to different hash slots and the client is a
	// cluster client. valkey-go would panic on such a command; the directory refuses it first.
	// The server's own reply to such a command begins with CROSSSLOT (see ServerError).
	ErrCrossSlot = errors.New("valkey: keys of one script span hash slots (CROSSSLOT)")
	// ErrClusterMode: a script version that reads old keys (O, A, B, backfill) was pointed at
	// a cluster. Those phases run with cluster mode disabled; only C runs on a cluster.
	ErrClusterMode = errors.New("valkey: this script version cannot run in cluster mode")
	// ErrTryAgain: the slot of the call stayed split by a migration through every retry.
	ErrTryAgain = errors.New("valkey: slot is being migrated (TRYAGAIN) through every retry")
	// ErrTopologyChanged: slots moved while a whole-keyspace scan ran, through every retry, so
	// the scan cannot claim to be complete.
	ErrTopologyChanged = errors.New("valkey: cluster topology changed during a complete scan")
	// ErrReply: a script replied with something the directory does not understand.
	ErrReply = errors.New("valkey: unexpected script reply")
)

// ServerError is an error reply from the server, keeping its prefix (CROSSSLOT, MOVED, ASK,
// TRYAGAIN, NOSCRIPT, ERR, CORRUPT...) so callers can branch on it.
type ServerError struct {
	Op     string // what the directory was doing
	Prefix string // the first word of the reply
	Msg    string // the whole reply
}

func (e *ServerError) Error() string {
	return fmt.Sprintf("valkey: %s: server replied %s", e.Op, e.Msg)
}

// wrap turns a client error into a ServerError when the server sent it, keeping other errors
// (network, context) as they are, with the operation named.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if ve, ok := valkeygo.IsValkeyErr(err); ok && !ve.IsNil() {
		msg := ve.Error()
		prefix, _, _ := strings.Cut(msg, " ")
		return &ServerError{Op: op, Prefix: prefix, Msg: msg}
	}
	return fmt.Errorf("valkey: %s: %w", op, err)
}

// Prefix returns the server's error prefix of err ("" if err is not a server reply).
func Prefix(err error) string {
	var se *ServerError
	if errors.As(err, &se) {
		return se.Prefix
	}
	if ve, ok := valkeygo.IsValkeyErr(err); ok {
		p, _, _ := strings.Cut(ve.Error(), " ")
		return p
	}
	return ""
}
