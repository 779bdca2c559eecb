package vreshard

import (
	"loam.dev/router/kernel/keyrange"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
)

// Input is what the driver feeds in.
type Input interface{ isInput() }

// Start reshards Record's keyspace from Source to Target (Vitess shard names) with workflow
// Workflow. Backends gives each target shard's primary (as the record will name it);
// Record is the stored record of the keyspace, whose Layout must be the Source shards.
type Start struct {
	Record   *shardmap.Record
	Workflow string
	Cell     string
	Source   []string
	Target   []string
	Backends map[string]shardmap.Backend
	Options  Options
}

// CancelRequest is an operator asking to stop: the machine cancels (before the writes
// switched) or reverses (after) at its next step boundary, never interrupting a command.
type CancelRequest struct{}

// Finalize is the operator's decision to keep the target shards once the writes are
// switched and verified: the machine completes the workflow (Reshard complete), after which
// no ReverseTraffic is possible. Before the hold it is ignored (the controller forwards the
// decision until the machine ends).
type Finalize struct{}

// Restarted tells a machine rebuilt by Restore that nothing is in flight and no timer is set.
type Restarted struct{}

// Reply answers Create, Switch, Verify, Complete and Cancel. Permanent says sending the
// command again cannot succeed (for Verify: the check failed).
type Reply struct {
	Step      string
	Attempt   int
	Err       error
	Permanent bool
}

// Inspected answers Inspect.
type Inspected struct {
	Step    string
	Attempt int
	Facts   Facts
	Err     error
}

// Serving answers ReadServing: the shards of the PRIMARY partition, in order, and those
// of the REPLICA partition.
type Serving struct {
	Step    string
	Attempt int
	Primary []SrvShard
	Replica []SrvShard
	Err     error
}

// SrvShard is one shard of a serving partition.
type SrvShard struct {
	Name  string
	Range keyrange.Range
}

// RecordWritten answers WriteRecord; on a lost compare-and-set Conflict is the record
// that won.
type RecordWritten struct {
	Step     string
	Attempt  int
	Version  uint64
	Conflict *shardmap.Record
	Err      error
}

// Progress answers Status. Copying is true while any stream still copies rows; LagMs is
// the largest replication lag of the streams once they replicate; Failed holds a stream's
// error message when one is in error.
type Progress struct {
	Step    string
	Attempt int
	Copying bool
	LagMs   int64
	Rows    int64
	Failed  string
	Err     error
}

// Diffed answers VDiff. Done is false while the VDiff runs; once done, Mismatch lists the
// tables whose rows differ (empty: 0 mismatches) and Rows is the rows compared.
type Diffed struct {
	Step     string
	Attempt  int
	Done     bool
	Mismatch []string
	Rows     int64
	Err      error
}

// TimerFired is fed back when a SetTimer deadline has passed.
type TimerFired machine.TimerFired

func (Start) isInput()         {}
func (CancelRequest) isInput() {}
func (Finalize) isInput()      {}
func (Restarted) isInput()     {}
func (Reply) isInput()         {}
func (Inspected) isInput()     {}
func (Serving) isInput()       {}
func (RecordWritten) isInput() {}
func (Progress) isInput()      {}
func (Diffed) isInput()        {}
func (TimerFired) isInput()    {}

// Options tune the reshard. Zero values take the defaults named on each field.
type Options struct {
	// MaxLagMs is the replication lag at or under which the copy counts as caught up. Default 5000.
	//
	// It keeps no data safe: SwitchTraffic of the primary makes the source read-only and
	// waits for the target to apply what it lags by before it switches, and VDiff compares
	// at a stopped position, so a lagging stream loses nothing. What it bounds is how long
	// the writes stop: the catch-up SwitchTraffic waits for, the writes paused or failing,
	// is the lag when the stop began, so going on only at a lag at or under MaxLagMs keeps
	// the stop at or under MaxLagMs. Vitess's own bound (max_replication_lag_allowed and
	// timeout, 30 s as the adapter sends them) refuses or aborts only a longer one. The
	// bound holds for a lag that does not grow again between the catch-up and the switch
	// (the VDiff and the reads come in between: a burst of writes then is not covered).
	// Checked by the world's "the writes stop for at most MaxLagMs" (TestWriteStopBoundedByMaxLag,
	// TestPropertyHeavyWrites, testdata/interaction/lag.txt) and the vreshard scenario's
	// vreshard-write-stop under heavy writes; mutant IgnoreLag trips both.
	MaxLagMs int64
	// PollEvery is how often Status and VDiff are asked again while they are not done, ms.
	// Default 1000.
	PollEvery int64
	// RetryAfter is the base delay before a failed command is sent again, ms, plus up to
	// half of it in jitter. Default 500.
	RetryAfter int64
	// Attempts is how many failures of a command raise an Alert (it is retried on). Default 3.
	Attempts int
	// FinalizeAfter, when positive, completes that many ms after the writes were switched
	// and verified unless a cancel (reverse) comes first. Zero holds until Finalize: the
	// hold is what keeps ReverseTraffic possible, so an operator can watch the target serve
	// and still go back.
	FinalizeAfter int64
	// Mutants break the protocol on purpose for the tests; never set them elsewhere.
	Mutants Mutants
}

// Mutants are deliberate protocol bugs, each tripping a named invariant in a test.
type Mutants struct {
	// SkipVDiff switches traffic without a VDiff. Trips "writes switched before a clean VDiff".
	SkipVDiff bool
	// SkipMirror does not mirror the switch of the writes: checkers and locate keep the
	// source layout while vtgate writes to the target. Trips "the record mirrors the live
	// partition".
	SkipMirror bool
	// ForgetSent restarts a step as new after a crash instead of sending it again with its
	// id, creating its VDiff afresh. Trips "no step twice".
	ForgetSent bool
	// SkipHold completes as soon as the check through vtgate passed, without waiting for
	// Finalize. Trips "completed before the operator finalized".
	SkipHold bool
	// IgnoreLag counts the copy as caught up once no stream copies, whatever its lag (the
	// MaxLagMs gate dropped). Trips "the writes stop for at most MaxLagMs" under heavy writes.
	IgnoreLag bool
	// SkipVerify holds (and so completes, once finalized) right after the switch of the
	// writes is mirrored, without the check through vtgate. Trips
	// vreshard-complete-after-verify.
	SkipVerify bool
	// RewriteSame writes the record when it already mirrors the serving partition (the
	// write changes nothing but the version, which other controllers compare-and-set
	// against). Trips vreshard-record-changes.
	RewriteSame bool
}

func (o Options) withDefaults() Options {
	if o.MaxLagMs <= 0 {
		o.MaxLagMs = 5000
	}
	if o.PollEvery <= 0 {
		o.PollEvery = 1000
	}
	if o.RetryAfter <= 0 {
		o.RetryAfter = 500
	}
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	return o
}
