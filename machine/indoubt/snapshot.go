package indoubt

import (
	"fmt"
	"slices"
	"strings"
)

// Snapshot is the monitor's whole state. It round-trips through encoding/json, which is how
// the driver persists it; Restore rebuilds a monitor from it.
type Snapshot struct {
	// Round counts the rounds started; step ids carry it.
	Round uint64 `json:"round"`
	// Open is true while the round's replies are awaited.
	Open bool `json:"open,omitempty"`
	// Next is when the next round starts (the round timer), 0 before the first Track.
	Next   int64   `json:"next,omitempty"`
	Shards []Shard `json:"shards,omitempty"` // sorted by name
	Roster Roll    `json:"roster"`
	// Alerts are the alerts raised now, sorted by ID.
	Alerts []Alert `json:"alerts,omitempty"`
	// Outbox holds the deliveries (Alert or ClearAlert) not yet acknowledged, at most one
	// per alert ID (the latest decision), sorted by ID.
	Outbox []Delivery `json:"outbox,omitempty"`
}

// Delivery is an alert decision waiting for the sink's acknowledgement.
type Delivery struct {
	ID    string `json:"id"`
	Step  string `json:"step"`
	Clear bool   `json:"clear,omitempty"` // a ClearAlert; otherwise an Alert of Alerts[ID]
}

// Shard is what the monitor knows of one shard.
type Shard struct {
	Name     string `json:"name"`
	Awaiting bool   `json:"awaiting,omitempty"` // this round's ListPrepared has not answered
	// Scanned is true once a scan succeeded; Xacts is what the last successful scan held,
	// so a shard that cannot be read keeps its transactions in doubt rather than forgetting
	// them.
	Scanned  bool   `json:"scanned,omitempty"`
	Failures int    `json:"failures,omitempty"` // rounds in a row without a successful scan
	Err      string `json:"err,omitempty"`      // the last failure
	Xacts    []Seen `json:"xacts,omitempty"`    // sorted by gid
}

// Seen is a prepared transaction with the time the monitor first saw it.
type Seen struct {
	Xact
	FirstSeen int64 `json:"first_seen"`
}

// Roll is what the monitor knows of the live router processes.
type Roll struct {
	Awaiting bool `json:"awaiting,omitempty"`
	// Fresh is true when this round's ListInstances answered; only a fresh roll may raise a
	// new coordinator alert.
	Fresh     bool      `json:"fresh,omitempty"`
	Processes []Process `json:"processes,omitempty"` // sorted by ID
}

// Snapshot returns a deep copy of the monitor's state.
func (m *Monitor) Snapshot() Snapshot { return m.s.clone() }

func (s Snapshot) clone() Snapshot {
	c := s
	c.Shards = slices.Clone(s.Shards)
	for i := range c.Shards {
		c.Shards[i].Xacts = slices.Clone(c.Shards[i].Xacts)
	}
	c.Roster.Processes = slices.Clone(s.Roster.Processes)
	c.Outbox = slices.Clone(s.Outbox)
	c.Alerts = slices.Clone(s.Alerts)
	for i := range c.Alerts {
		c.Alerts[i] = c.Alerts[i].clone()
	}
	return c
}

func (a Alert) clone() Alert {
	a.Txns = slices.Clone(a.Txns)
	for i := range a.Txns {
		a.Txns[i].Parts = slices.Clone(a.Txns[i].Parts)
	}
	return a
}

// Restore rebuilds a monitor from a snapshot, with opts. Feed it Restarted first.
func Restore(s Snapshot, opts Options) (*Monitor, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("indoubt: cannot restore: %w", err)
	}
	m := New(opts)
	m.s = s.clone()
	return m, nil
}

func (s Snapshot) check() error {
	if !slices.IsSortedFunc(s.Shards, func(a, b Shard) int { return strings.Compare(a.Name, b.Name) }) {
		return fmt.Errorf("shards are not sorted by name")
	}
	for i, sh := range s.Shards {
		if sh.Name == "" || i > 0 && s.Shards[i-1].Name == sh.Name {
			return fmt.Errorf("shards[%d]: name %q is empty or repeated", i, sh.Name)
		}
		if sh.Awaiting && !s.Open {
			return fmt.Errorf("shards[%d] (%s) awaits a reply but no round is open", i, sh.Name)
		}
	}
	if !slices.IsSortedFunc(s.Roster.Processes, func(a, b Process) int { return strings.Compare(a.ID, b.ID) }) {
		return fmt.Errorf("roster.processes are not sorted by id")
	}
	if !slices.IsSortedFunc(s.Alerts, func(a, b Alert) int { return strings.Compare(a.ID, b.ID) }) {
		return fmt.Errorf("alerts are not sorted by id")
	}
	for i, a := range s.Alerts {
		switch a.Reason {
		case ReasonGone, ReasonRestarted, ReasonForeign, ReasonUnscanned, ReasonStuck:
		default:
			return fmt.Errorf("alerts[%d] (%s): unknown reason %q", i, a.ID, a.Reason)
		}
	}
	if !slices.IsSortedFunc(s.Outbox, func(a, b Delivery) int { return strings.Compare(a.ID, b.ID) }) {
		return fmt.Errorf("outbox is not sorted by id")
	}
	for i, d := range s.Outbox {
		if i > 0 && s.Outbox[i-1].ID == d.ID {
			return fmt.Errorf("outbox[%d]: alert %q has two deliveries", i, d.ID)
		}
		a, raised := findAlert(s.Alerts, d.ID)
		if raised == d.Clear {
			return fmt.Errorf("outbox[%d]: alert %q: clear=%v but raised=%v", i, d.ID, d.Clear, raised)
		}
		if raised && a.Step != d.Step {
			return fmt.Errorf("outbox[%d]: alert %q: step %q is not the alert's %q", i, d.ID, d.Step, a.Step)
		}
	}
	return nil
}
