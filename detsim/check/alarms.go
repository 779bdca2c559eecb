package check

import (
	"fmt"

	"loam.dev/router/detsim"
)

// InvNoEarlyAlert is the in-doubt monitor's false-alarm invariant: no alert names a branch
// younger than the threshold when it was decided.
const InvNoEarlyAlert = "indoubt-no-early-alert"

// AlertedBranch is one prepared branch an in-doubt alert named: the alert, the branch's
// gid, when the world prepared it (the server's clock) and when the monitor sent the alert
// (the monitor's clock).
type AlertedBranch struct {
	Alert, GID        string
	Prepared, Decided int64
}

// NoEarlyAlert checks InvNoEarlyAlert: a branch younger than threshold (ms) is most likely
// PgDog's own commit still running, and alerting it is a false alarm an operator may act
// on by resolving it by hand. It is the same check in both tiers: the monitor's world test
// (machine/indoubt) and the simulator's bank scenario. A monitor whose clock jumped forward
// sees every branch older than it is; the simulator passes the monitor's clock as Decided,
// so a jump is the clock's fault, not the monitor's.
func NoEarlyAlert(named []AlertedBranch, threshold int64) *detsim.Violation {
	for _, b := range named {
		if b.Decided-b.Prepared < threshold {
			return &detsim.Violation{Invariant: InvNoEarlyAlert, T: b.Decided,
				Detail: fmt.Sprintf("alert %s names %s, prepared at t=%d, at t=%d: %d ms old, under the threshold of %d ms",
					b.Alert, b.GID, b.Prepared, b.Decided, b.Decided-b.Prepared, threshold)}
		}
	}
	return nil
}
