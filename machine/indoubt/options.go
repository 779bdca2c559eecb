package indoubt

import "time"

// Options tune one monitor. The zero value takes the defaults; options are not part of the
// snapshot, so a restored monitor takes the options its driver passes to Restore.
type Options struct {
	// Period is the time between scans of every shard (default 30s, §6.5). A round's
	// replies are awaited until the next round starts.
	Period time.Duration
	// Threshold is the age past which a prepared transaction whose coordinator is gone or
	// restarted is alerted (PgDog's 2pc_in_doubt_alert; default 5 minutes).
	Threshold time.Duration
	// Deployment is the DEPLOYMENT_ID the database's PgDog instances run with, "" when
	// they run without one. It is how a gid's deployment and instance parts are told apart.
	Deployment string
	// BlindAfter is how many rounds in a row a shard's scan may fail before the monitor
	// alerts that it cannot see that shard (default 3).
	BlindAfter int
	// StuckAfter is the age past which a transaction is alerted even though its
	// coordinator runs and started before it (ReasonStuck; default twice Threshold). PgDog
	// retries COMMIT PREPARED every 333 ms, so one still prepared that long will not be
	// finished: its prepare reached the shard after the coordinator died and restarted
	// (the new process's recovery had already run), or the coordinator cannot log in.
	StuckAfter time.Duration

	// Mutant breaks one of the monitor's rules on purpose, so the tests can show their
	// checkers catch the break. Never set it outside a test.
	Mutant Mutant
}

// Mutant names a deliberate bug. The zero value is the correct monitor.
type Mutant uint8

const (
	// MutantNone is the correct monitor.
	MutantNone Mutant = iota
	// MutantResendAcked keeps a delivery in the outbox after the sink acknowledged it:
	// the decision is sent again every round. It trips "indoubt-decide-once".
	MutantResendAcked
	// MutantGroupByShard groups the coordinators' transactions by shard, not by the
	// instance that wrote them: the alert names the wrong process to check. It trips
	// "indoubt-alert-names".
	MutantGroupByShard
)

const (
	defaultPeriod     = 30 * time.Second
	defaultThreshold  = 5 * time.Minute
	defaultBlindAfter = 3
)

func (o Options) withDefaults() Options {
	if o.Period <= 0 {
		o.Period = defaultPeriod
	}
	if o.Threshold <= 0 {
		o.Threshold = defaultThreshold
	}
	if o.BlindAfter <= 0 {
		o.BlindAfter = defaultBlindAfter
	}
	if o.StuckAfter <= 0 {
		o.StuckAfter = 2 * o.Threshold
	}
	return o
}
