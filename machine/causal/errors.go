package causal

import (
	"errors"
	"fmt"

	"loam.dev/router/kernel/lsn"
)

var (
	// ErrNoEndpoints: the destination hostgroup has no members. Configure it (SetHostgroup).
	ErrNoEndpoints = errors.New("causal: hostgroup has no endpoints")
	// ErrNotReached: the acquisition deadline passed before any member of the destination
	// reached the requirement. Returned as a *WaitError.
	ErrNotReached = errors.New("causal: no endpoint reached the required LSN before the acquisition deadline")
	// ErrDuplicateRequest: a request ID was reused while the first request was still waiting.
	ErrDuplicateRequest = errors.New("causal: request ID already waiting")
	// ErrDisconnected: the frontend was disconnected while its request waited.
	ErrDisconnected = errors.New("causal: frontend disconnected")
)

// WaitError says why a causal request expired: what it required, from which execution, and
// whether the requirement itself was still pending (the source had not been polled since).
type WaitError struct {
	Hostgroup   int
	From        int
	Source      lsn.Endpoint
	Completed   int64   // the recorded completion time of the source execution
	Resolved    bool    // false: no poll of Source sent after Completed had answered
	Requirement lsn.LSN // meaningful when Resolved
	Waited      int64   // milliseconds from arrival to expiry
}

func (e *WaitError) Error() string {
	if !e.Resolved {
		return fmt.Sprintf("causal: hostgroup %d: requirement from hostgroup %d still unknown after %d ms: no poll of %s sent after %d ms answered (is the LSN monitor polling it?)",
			e.Hostgroup, e.From, e.Waited, e.Source, e.Completed)
	}
	return fmt.Sprintf("causal: hostgroup %d: no endpoint reached %s (required by the execution on %s at %d ms, hostgroup %d) within %d ms; check replication lag or a paused replay (pg_last_wal_replay_lsn)",
		e.Hostgroup, e.Requirement, e.Source, e.Completed, e.From, e.Waited)
}

// Unwrap makes errors.Is(err, ErrNotReached) true.
func (e *WaitError) Unwrap() error { return ErrNotReached }
