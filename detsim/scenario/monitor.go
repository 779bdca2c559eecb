package scenario

import (
	"fmt"
	"slices"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/detsim"
	"loam.dev/router/detsim/check"
	"loam.dev/router/detsim/model"
	"loam.dev/router/machine/indoubt"
)

// monitor hosts the in-doubt monitor on the daemon's controller and executes its commands
// over the network: prepared transactions from the backends, the roster from the
// orchestrator (every running router process with its instance id and start time), alerts
// to a sink that records them.
type monitor struct {
	d      *daemon
	host   *detsim.Host[indoubt.Input, indoubt.Command]
	opts   indoubt.Options
	k8s    detsim.NodeID
	sink   detsim.NodeID
	shards map[string]*model.Backend // by the record's shard name
	// Alerts is every alert delivered, in order, and Cleared every clear.
	alerts []sinkAlert
	// dropAlerts is the mutant sink that acknowledges alerts and drops them.
	dropAlerts bool
	// named is every branch an alert sent named, with its true prepare time, for
	// check.NoEarlyAlert.
	named []check.AlertedBranch
	// decisions checks every alert and clear sent, with the monitor's world test's code;
	// violation is the first it found.
	decisions *check.Decisions
	violation *detsim.Violation
}

type sinkAlert struct {
	T       int64
	Clear   bool
	ID      string
	Reason  indoubt.Reason
	GIDs    []string
	Instant string
}

func hostMonitor(d *daemon, opts indoubt.Options, shards map[string]*model.Backend) *monitor {
	f := d.f
	m := &monitor{d: d, opts: opts, shards: shards, decisions: check.NewDecisions(opts.Deployment),
		k8s: f.s.Net.AddNode("k8s"), sink: f.s.Net.AddNode("alerts")}
	m.host = detsim.NewHost[indoubt.Input, indoubt.Command](d.ctl, indoubt.New(opts), detsim.HostConfig[indoubt.Input, indoubt.Command]{
		Name:       "indoubt",
		Exec:       m.exec,
		TimerFired: func(id string) indoubt.Input { return indoubt.TimerFired{ID: id} },
		Restarted:  indoubt.Restarted{},
		Save:       saveBy[indoubt.Input, indoubt.Command]("indoubt", func(s indoubt.Snapshot) (*indoubt.Monitor, error) { return indoubt.Restore(s, opts) }),
		Feeding: func(in indoubt.Input) {
			if d, ok := in.(indoubt.Delivered); ok {
				m.decisions.Delivered(d.Step, d.Err)
			}
		},
	})
	return m
}

func (m *monitor) report(v *detsim.Violation) {
	if m.violation == nil {
		m.violation = v
	}
}

// track starts the rounds.
func (m *monitor) track() {
	names := make([]string, 0, len(m.shards))
	for n := range m.shards {
		names = append(names, n)
	}
	slices.Sort(names)
	m.host.Feed(indoubt.Track{Shards: names})
}

func (m *monitor) exec(cmd indoubt.Command) {
	s, f := m.d.f.s, m.d.f
	ctl := m.d.ctl.Node
	back := m.host.Caller()
	switch c := cmd.(type) {
	case indoubt.ListPrepared:
		b, ok := m.shards[c.Shard]
		if !ok {
			back(indoubt.Prepared{Step: c.Step, Shard: c.Shard, Err: fmt.Errorf("scenario: no shard %q", c.Shard)})
			return
		}
		s.Net.Call(ctl, b.Node, "prepared", detsim.Idempotent,
			func(rep detsim.Reply) { rep(b.Prepared(), nil) },
			func(v any, err error) {
				p := indoubt.Prepared{Step: c.Step, Shard: c.Shard, Err: err}
				if err == nil {
					for _, x := range v.([]adapters.PreparedXact) {
						p.Xacts = append(p.Xacts, indoubt.Xact{GID: x.GID, Prepared: x.Prepared.UnixMilli(), Owner: x.Owner, Database: x.Database})
					}
				}
				back(p)
			})
	case indoubt.ListInstances:
		s.Net.Call(ctl, m.k8s, "roster", detsim.Idempotent,
			func(rep detsim.Reply) {
				var ps []indoubt.Process
				for _, r := range f.routers {
					if r.Up() {
						ps = append(ps, indoubt.Process{ID: r.ProcessID(), Started: r.Started})
					}
				}
				rep(ps, nil)
			},
			func(v any, err error) {
				ro := indoubt.Roster{Step: c.Step, Err: err}
				if err == nil {
					ro.Processes = v.([]indoubt.Process)
				}
				back(ro)
			})
	case indoubt.Alert:
		m.report(m.decisions.Alert(m.d.ctl.Now(), c))
		a := sinkAlert{ID: c.ID, Reason: c.Reason, Instant: c.Instance}
		for _, t := range c.Txns {
			for _, p := range t.Parts {
				a.GIDs = append(a.GIDs, p.GID)
				if b, ok := m.shards[p.Shard]; ok {
					if pt, ok := b.PreparedTxns()[p.GID]; ok {
						m.named = append(m.named, check.AlertedBranch{Alert: c.ID, GID: p.GID, Prepared: pt.At, Decided: m.d.ctl.Now()})
					}
				}
			}
		}
		s.Net.Call(ctl, m.sink, "alert "+c.ID, detsim.Idempotent,
			func(rep detsim.Reply) {
				if !m.dropAlerts {
					a.T = s.Now()
					m.alerts = append(m.alerts, a)
					s.Probe("indoubt.alert." + string(c.Reason))
				}
				rep(nil, nil)
			},
			func(_ any, err error) { back(indoubt.Delivered{Step: c.Step, Err: err}) })
	case indoubt.ClearAlert:
		m.report(m.decisions.Clear(m.d.ctl.Now(), c))
		s.Net.Call(ctl, m.sink, "clear "+c.ID, detsim.Idempotent,
			func(rep detsim.Reply) {
				m.alerts = append(m.alerts, sinkAlert{T: s.Now(), Clear: true, ID: c.ID})
				s.Probe("indoubt.clear")
				rep(nil, nil)
			},
			func(_ any, err error) { back(indoubt.Delivered{Step: c.Step, Err: err}) })
	default:
		if !m.execMutant(cmd) {
			panic(fmt.Sprintf("scenario: indoubt command %T has no executor", cmd))
		}
	}
}

// active returns, per gid, the alerts raised and not cleared, with when each was first
// raised.
func (m *monitor) active() map[string]int64 {
	first := map[string]int64{}
	open := map[string][]string{} // alert id → gids
	since := map[string]int64{}
	for _, a := range m.alerts {
		if a.Clear {
			delete(open, a.ID)
			delete(since, a.ID)
			continue
		}
		open[a.ID] = a.GIDs
		if _, ok := since[a.ID]; !ok {
			since[a.ID] = a.T
		}
	}
	for id, gids := range open {
		for _, g := range gids {
			if t, ok := first[g]; !ok || since[id] < t {
				first[g] = since[id]
			}
		}
	}
	return first
}

func ms64(d time.Duration) int64 { return d.Milliseconds() }
