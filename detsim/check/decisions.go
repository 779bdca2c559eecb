package check

import (
	"fmt"
	"reflect"

	"loam.dev/router/detsim"
	"loam.dev/router/machine/indoubt"
)

// The in-doubt monitor's decisions, checked as it sends them: the same code in both tiers,
// the monitor's world test (machine/indoubt, world_test.go) and the simulator's bank
// scenario (detsim/scenario, monitor.go). Before they were shared only the world test
// looked at them, so a run with faults never did.
const (
	// InvDecideOnce: every decision the monitor sends changes what the sink shows (a new
	// alert, a changed one, or the clear of a raised one), and it is sent again until the
	// sink acknowledges it, never after. An alert sent again unchanged pages the operator
	// again for nothing; one sent after its acknowledgement may overwrite a newer one.
	InvDecideOnce = "indoubt-decide-once"
	// InvAlertNames: an alert names PgDog's gids grouped under the coordinator instance
	// that wrote them (one alert per instance, "coordinator/<instance>", each gid under its
	// own transaction) and any other gid in a "foreign/<shard>" alert of its own: what the
	// operator is told to check is the process that can still finish them.
	InvAlertNames = "indoubt-alert-names"
)

// Decisions follows the alerts and clears one monitor sends (over every restart of its
// driver). Use NewDecisions.
type Decisions struct {
	deployment string
	sent       map[string]bool          // decision steps sent
	acked      map[string]bool          // decision steps the monitor was told were delivered
	raised     map[string]indoubt.Alert // by id: the last decided alert, until cleared
}

// NewDecisions returns a checker for a monitor run with Options.Deployment deployment.
func NewDecisions(deployment string) *Decisions {
	return &Decisions{deployment: deployment, sent: map[string]bool{}, acked: map[string]bool{}, raised: map[string]indoubt.Alert{}}
}

// Alert checks an alert the monitor sends at now.
func (d *Decisions) Alert(now int64, c indoubt.Alert) *detsim.Violation {
	if d.acked[c.Step] {
		return &detsim.Violation{Invariant: InvDecideOnce, T: now, Detail: fmt.Sprintf("alert %s sent again (%s) after the sink acknowledged it", c.ID, c.Step)}
	}
	if d.sent[c.Step] {
		return nil // sent again until acknowledged: the same decision
	}
	d.sent[c.Step] = true
	if v := d.names(now, c); v != nil {
		return v
	}
	prev, ok := d.raised[c.ID]
	d.raised[c.ID] = c
	if ok {
		prev.Step = c.Step
		if reflect.DeepEqual(prev, c) {
			return &detsim.Violation{Invariant: InvDecideOnce, T: now, Detail: fmt.Sprintf("alert %s decided again unchanged (%s)", c.ID, c.Step)}
		}
	}
	return nil
}

// Clear checks a clear the monitor sends at now.
func (d *Decisions) Clear(now int64, c indoubt.ClearAlert) *detsim.Violation {
	if d.acked[c.Step] {
		return &detsim.Violation{Invariant: InvDecideOnce, T: now, Detail: fmt.Sprintf("clear of %s sent again (%s) after the sink acknowledged it", c.ID, c.Step)}
	}
	if d.sent[c.Step] {
		return nil
	}
	d.sent[c.Step] = true
	if _, ok := d.raised[c.ID]; !ok {
		return &detsim.Violation{Invariant: InvDecideOnce, T: now, Detail: fmt.Sprintf("clear of %s (%s), which is not raised", c.ID, c.Step)}
	}
	delete(d.raised, c.ID)
	return nil
}

// Delivered records an answer the monitor takes for the decision step: an answer without
// an error acknowledges it.
func (d *Decisions) Delivered(step string, err error) {
	if err == nil {
		d.acked[step] = true
	}
}

// Sent reports whether the decision step was sent before.
func (d *Decisions) Sent(step string) bool { return d.sent[step] }

// Raised is the alerts decided and not cleared, by id.
func (d *Decisions) Raised() map[string]indoubt.Alert { return d.raised }

func (d *Decisions) names(now int64, c indoubt.Alert) *detsim.Violation {
	for _, t := range c.Txns {
		for _, p := range t.Parts {
			g, err := indoubt.ParseGID(p.GID, d.deployment)
			var bad string
			switch {
			case c.Reason == indoubt.ReasonForeign:
				if err == nil || t.Name != p.GID || c.ID != "foreign/"+p.Shard {
					bad = fmt.Sprintf("alert %s (foreign) names %s on %s as %s", c.ID, p.GID, p.Shard, t.Name)
				}
			case err != nil:
				bad = fmt.Sprintf("alert %s (%s) names %s, which is not one of PgDog's gids: %v", c.ID, c.Reason, p.GID, err)
			case g.Txn != t.Name || g.Instance != c.Instance || c.ID != "coordinator/"+g.Instance:
				bad = fmt.Sprintf("alert %s (%s) groups %s under transaction %s of instance %s", c.ID, c.Reason, p.GID, t.Name, c.Instance)
			}
			if bad != "" {
				return &detsim.Violation{Invariant: InvAlertNames, T: now, Detail: bad}
			}
		}
	}
	return nil
}
