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
}

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
