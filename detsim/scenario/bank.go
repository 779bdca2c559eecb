package scenario

import (
	"fmt"
	"hash"
	"strconv"
	"time"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/check"
	"loam.dev/router/detsim/model"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine/indoubt"
)

// Bank is transfers between accounts under PgDog's two-phase commit while coordinators
// crash between prepare and decision (and after it), lose their log, stay down past the
// alert threshold, and backends restart; the in-doubt monitor runs on the daemon, whose
// clock jumps and which restarts. It checks atomicity (no transaction both committed and
// rolled back, none resolved against its coordinator's decision), conservation of money,
// that the monitor never resolves a transaction, and that it alerts within its threshold
// for every transaction its coordinator left in doubt.
var Bank = detsim.Scenario{
	Name: "bank",
	Points: []string{"net.drop", "net.partition", "net.reset", "pgdog.crash", "backend.restart",
		"coord.crash.after_prepare", "coord.crash.after_decision", "coord.wal.lost", "ctl.restart", "clock.jump"},
	Probes: []string{"fault:coord.crash.after_prepare", "fault:coord.crash.after_decision", "fault:coord.wal.lost",
		"fault:pgdog.crash", "fault:backend.restart", "fault:ctl.restart", "fault:clock.jump", "model.2pc.recovery",
		"indoubt.alert.gone", "indoubt.alert.restarted", "indoubt.clear", "CrossShardCommit.MonitorRestart"},
	Mutants: append([]string{MutantAckEarly, MutantCommitEarly, MutantAlertsDropped, MutantThresholdWrongUnit,
		MutantResendAcked, MutantGroupByShard}, indoubtMutants...),
	World:       bankWorld,
	Tiny:        bankTiny,
	TinyPoints:  []string{"coord.crash.after_prepare", "coord.crash.after_decision", "coord.wal.lost", "backend.restart"},
	TinyMutants: append([]string{MutantAckEarly, MutantCommitEarly}, indoubtMutants...),
}

const (
	// MutantCommitEarly is a coordinator that commits each branch as soon as it is
	// prepared. It trips "2pc-atomic".
	MutantCommitEarly = "coord-commit-early"
	// MutantAlertsDropped is an alert sink that acknowledges alerts and loses them. It
	// trips "indoubt-alerts".
	MutantAlertsDropped = "alerts-dropped"
	// MutantThresholdWrongUnit configures the monitor's threshold in the wrong unit (the
	// seconds count as a time.Duration, nanoseconds): it alerts every branch it sees. It trips
	// "indoubt-no-early-alert" (issue 20: the simulator had no checker for false alarms).
	MutantThresholdWrongUnit = "indoubt-threshold-wrong-unit"
	// MutantResendAcked is indoubt.MutantResendAcked: a delivery stays in the outbox after
	// the sink acknowledged it. It trips "indoubt-decide-once".
	MutantResendAcked = "indoubt-resend-acked"
	// MutantGroupByShard is indoubt.MutantGroupByShard: coordinator alerts grouped by shard.
	// It trips "indoubt-alert-names".
	MutantGroupByShard = "indoubt-group-by-shard"
)

func bankWorld(s *detsim.Sim, mutant string) *detsim.Violation {
	f := newFleet(s)
	rec := pgHash(1, f.backends(0, 2, mutant == MutantAckEarly))
	f.start(rec, true, s.Param("instances", 2+s.Intn(2)), s.Param("clients", 2+s.Intn(2)))
	noNodeID := s.Param("no_node_id", s.Intn(2)) == 1
	for _, r := range f.routers {
		r.NoNodeID = noNodeID
		r.Coordinator().CommitEarly = mutant == MutantCommitEarly
	}
	f.crashes()
	opts := indoubt.Options{
		Period:     time.Duration(s.Param("monitor_period_s", []int{10, 30}[s.Intn(2)])) * time.Second,
		Threshold:  time.Duration(s.Param("monitor_threshold_s", []int{60, 300}[s.Intn(2)])) * time.Second,
		Deployment: "sim-app",
	}
	opts.StuckAfter = 2 * opts.Threshold // the default, named: the alert check's bound needs it
	d := newController(f)
	mopts := opts
	if mutant == MutantThresholdWrongUnit {
		mopts.Threshold = time.Duration(opts.Threshold / time.Second) // the seconds, as nanoseconds
	}
	switch mutant {
	case MutantResendAcked:
		mopts.Mutant = indoubt.MutantResendAcked
	case MutantGroupByShard:
		mopts.Mutant = indoubt.MutantGroupByShard
	}
	m := hostMonitor(d, mopts, shardsByName(f, rec))
	m.dropAlerts = mutant == MutantAlertsDropped
	m.track()
	n := s.Param("ops", 10+s.Intn(31))
	s.SetWorkload(n, transferOps(s, f, n))
	quiet := ms64(opts.StuckAfter) + 3*ms64(opts.Period) + 4*s.Options().Net.CallTimeout + 10_000
	if v := f.runToEnd(quiet, 300_000); v != nil {
		return v
	}
	if v := check.NoEarlyAlert(m.named, ms64(opts.Threshold)); v != nil {
		return v
	}
	if m.violation != nil {
		return m.violation
	}
	coords := make([]*model.Coordinator, len(f.routers))
	for i, r := range f.routers {
		coords[i] = r.Coordinator()
	}
	if v := check.Atomic(f.order, coords, monitorID, 0); v != nil {
		return v
	}
	return check.InDoubtAlerts(f.order, f.routers, m.active(), check.AlertBounds{
		Threshold: ms64(opts.Threshold), StuckAfter: ms64(opts.StuckAfter), Period: ms64(opts.Period), CallTimeout: s.Options().Net.CallTimeout,
		Healed: s.Options().Net.FaultWindow, End: s.Now()})
}

// shardsByName maps the record's shard names to their backends.
func shardsByName(f *fleet, rec *shardmap.Record) map[string]*model.Backend {
	out := map[string]*model.Backend{}
	for _, sh := range rec.Shards {
		out[sh.Name] = f.dir[sh.Backend.Host]
	}
	return out
}

// transferOps generates n transfers between accounts a0..a5, schedules those kept, and
// returns how to describe them.
func transferOps(s *detsim.Sim, f *fleet, n int) func(int) string {
	desc := make([]func() string, n)
	var at int64
	for i := range n {
		at += s.Between(0, 600)
		a := s.Intn(6)
		b := (a + 1 + s.Intn(5)) % 6
		from, to := "a"+strconv.Itoa(a), "a"+strconv.Itoa(b)
		amount := 1 + s.Between(0, 99)
		client, via := s.Intn(len(f.clients)), s.Intn(len(f.routers))
		id := int64(i + 1)
		desc[i] = func() string {
			return fmt.Sprintf("t=%d client-%d via %s transfer %d %s->%s %d", at, client, f.routers[via].ID, id, from, to, amount)
		}
		if !s.KeepOp(i) {
			continue
		}
		s.At(at, detsim.Label{Kind: "op", What: "transfer", ID: id}, func() { f.transfer(client, via, id, from, to, amount) })
	}
	return func(i int) string { return desc[i]() }
}

// bankTiny is the exhaustive configuration: two shards, two instances, one client, one
// transfer across the shards.
func bankTiny(s *detsim.Sim, mutant string) *detsim.Violation {
	f := newFleet(s)
	rec := pgHash(1, f.backends(0, 2, mutant == MutantAckEarly))
	f.start(rec, true, 2, 1)
	for _, r := range f.routers {
		r.Coordinator().CommitEarly = mutant == MutantCommitEarly
	}
	f.crashes()
	f.hashState()
	if MutantBuild {
		// The monitor, with short timings so a transaction left in doubt is alerted (and,
		// in this build, committed) within the run. Its rounds multiply the states about
		// a hundredfold, so the normal build's tiny configuration leaves it out: the
		// monitor does nothing but read and alert there, which the sampled runs check.
		opts := indoubt.Options{Period: 10 * time.Second, Threshold: 10 * time.Second, Deployment: "sim-app"}
		d := newController(f)
		m := hostMonitor(d, opts, shardsByName(f, rec))
		outer := s.StateHasher()
		s.SetStateHasher(func(h hash.Hash) {
			outer(h)
			detsim.RelativeJSON(h, m.host.Machine().(*indoubt.Monitor).Snapshot(), d.ctl.Now())
			fmt.Fprintf(h, "alerts=%d", len(m.alerts))
		})
		m.track()
	}
	var on [2]string
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		on[model.Route(k, 2)] = k
	}
	s.At(0, detsim.Label{Kind: "op", ID: 1}, func() { f.transfer(0, 0, 1, on[0], on[1], 10) })
	s.StartNemesis()
	s.Run(32_000, 100_000)
	coords := []*model.Coordinator{f.routers[0].Coordinator(), f.routers[1].Coordinator()}
	if v := check.Atomic(f.order, coords, monitorID, 0); v != nil {
		return v
	}
	return detsim.Pruned(s)
}
