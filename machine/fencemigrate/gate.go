package fencemigrate

import (
	"errors"
	"fmt"

	"loam.dev/router/kernel/fencing"
)

// Gate names a condition a transition waits for.
type Gate string

// The gates. A refusal names exactly one: the first that does not hold.
const (
	GateAdjacent   Gate = "two-adjacent-versions"   // only the next version may be allowed
	GateFleetOnO   Gate = "every-pod-on-O"          // (allow A)
	GateFleetOnA   Gate = "every-pod-on-A"          // allow B
	GateFleetOnB   Gate = "every-pod-on-B"          // backfill, allow C
	GateFleetOnC   Gate = "every-pod-on-C"          // enable
	GateBackfilled Gate = "backfill-done"           // allow C
	GateDrained    Gate = "old-leases-drained"      // allow C: one lease TTL, then a scan finding none
	GateOnce       Gate = "backfill-once"           // the backfill runs once
	GateInFlight   Gate = "no-operation-in-flight"  // one backfill or enable at a time
	GateConfirmed  Gate = "explicit-confirmation"   // enable: the token asked for
	GateDoorClosed Gate = "cluster-mode-is-enabled" // after enable nothing moves again
)

func fleetGate(v fencing.Version) Gate {
	return [...]Gate{GateFleetOnO, GateFleetOnA, GateFleetOnB, GateFleetOnC}[v]
}

// ErrRefused is wrapped by every GateError.
var ErrRefused = errors.New("fencemigrate: refused")

// GateError is a refusal as an error: which request, which gate, what is missing.
type GateError struct {
	Request string
	Gate    Gate
	Detail  string
}

func (e *GateError) Error() string {
	return fmt.Sprintf("fencemigrate: %s refused: gate %s does not hold: %s", e.Request, e.Gate, e.Detail)
}

// Unwrap lets errors.Is(err, ErrRefused) match.
func (e *GateError) Unwrap() error { return ErrRefused }
