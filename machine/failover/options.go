package failover

// Options tune the failover. Zero values take the defaults named on each field.
type Options struct {
	// RetryAfter is the base delay before a failed command is sent again, in ms, plus up
	// to half of it in jitter from ctx.Rand. Default 500.
	RetryAfter int64
	// Attempts is how many times the old primary's fence is tried before the failover goes
	// on without it, and how many failures of any other command raise an Alert (those are
	// retried until they succeed). Default 3.
	Attempts int
	// Mutants break the protocol on purpose for the checkers; never set them outside tests.
	Mutants Mutants
}

// Mutants are deliberate protocol bugs, each tripping a named invariant in a test.
type Mutants struct {
	// SkipFence repoints without trying to fence the old primary. Trips "the record names
	// the promoted primary only after the old one was fenced or tried Attempts times".
	SkipFence bool
	// RecordBeforeReparent (Vitess) writes the record before TabletExternallyReparented:
	// the record says the promoted tablet is primary while Vitess still routes to the old
	// one. Trips "the record mirrors Vitess".
	RecordBeforeReparent bool
	// PushBeforeRecord (PgDog) hands the new generation to ConfigPush before it is
	// stored. Trips "ConfigPush gets only a stored generation".
	PushBeforeRecord bool
	// KeepGeneration repoints without a new generation: routers that loaded the old files
	// cannot tell them from the new. Trips "generations only increase" (and the store's
	// own check).
	KeepGeneration bool
	// RetryPermanent retries a Reparent refused for good (Reply.Permanent) as if the
	// refusal were transient: a tablet of another shard is asked about forever. Trips "a
	// permanent refusal is not sent again".
	RetryPermanent bool
	// ClaimFenced reports the old primary fenced (Done.Fenced) when its fence was given
	// up on after Attempts tries: the operator is told there is nothing to fence by hand.
	// Trips "failover-done" ("done says fenced but the old primary takes writes").
	ClaimFenced bool
}

func (o Options) withDefaults() Options {
	if o.RetryAfter <= 0 {
		o.RetryAfter = 500
	}
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	return o
}
