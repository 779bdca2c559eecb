package configpush

import "time"

// Options tune one machine. The zero value takes the defaults; options are not part of the
// snapshot, so a restored machine takes the options its driver passes to Restore.
type Options struct {
	// StepTimeout bounds the wait for one attempt's reply; when it passes the attempt counts
	// as failed (default 10s).
	StepTimeout time.Duration
	// Backoff is the delay before the first retry; it doubles per attempt up to MaxBackoff
	// (defaults 500ms and 10s). Each delay is jittered from ctx.Rand over [d/2, d], so
	// instances that failed together do not retry together.
	Backoff, MaxBackoff time.Duration
	// MaxAttempts bounds the attempts of one step (default 5). An instance whose step fails
	// that often is reported as stuck and the push finishes without it.
	MaxAttempts int

	// AwaitFiles makes every instance wait, before its RELOAD, until it can see the
	// pushed files (AwaitFiles → FilesSeen): on Kubernetes the kubelet projects a
	// ConfigMap into a pod up to its sync period plus its cache TTL after the write (a
	// minute or more), and a RELOAD sent earlier re-reads the old files. The wait is
	// retried with the same backoff as every step, up to AwaitAttempts.
	AwaitFiles bool
	// AwaitAttempts bounds the attempts of the AwaitFiles step (default 30: with the
	// default backoff, about four and a half minutes of waiting).
	AwaitAttempts int

	// Mutant breaks one of the machine's safety rules on purpose, so the simulator can show
	// its checkers catch the break. Never set it outside a test.
	Mutant Mutant
}

// Mutant names a deliberate bug. The zero value is the correct machine.
type Mutant uint8

const (
	// MutantNone is the correct machine.
	MutantNone Mutant = iota
	// MutantWriteUnpublished accepts a Push whose Generation the record does not publish yet
	// (for example State.To during a reshard) and writes its files: an instance that
	// restarts then routes by a generation whose cutover has not fenced the source.
	// It trips "files are written only for a published generation" (§6.4).
	MutantWriteUnpublished
	// MutantRegress accepts a Push older than the generation already written, so the files
	// go backwards. It trips "generations only increase".
	MutantRegress
	// MutantNoReloadRetry drops the retry of a RELOAD that re-read older files (the
	// instance reports an older generation after it): the instance is given up on at once.
	// It trips "every instance converges" when the files reach pods late.
	MutantNoReloadRetry
	// MutantNoStrayWait drops the wait for a superseded push's files write: the newer
	// push's write is issued while the older one is still awaited, so the older files can
	// land last. It trips "push-one-write".
	MutantNoStrayWait
	// MutantReloadEarly starts the instances' steps as soon as the files write is issued,
	// not once it is answered: a RELOAD can re-read the files the instance already had.
	// It trips "push-reload-after-files".
	MutantReloadEarly
	// MutantSilentGiveUp gives up on a files write that ran out of attempts without
	// reporting an Outcome: the push never ends. It trips "push-ends".
	MutantSilentGiveUp
	// MutantSeenAny takes a FilesSeen answer for the older files as seen: with AwaitFiles
	// the RELOAD goes to a pod that still shows the old files. It trips
	// "push-reload-after-seen".
	MutantSeenAny
	// MutantConfirmOnReload confirms an instance as soon as its RELOAD succeeds, without
	// observing what it routes by: where the files reach the pod late and AwaitFiles is
	// off, a RELOAD that re-read the old files is confirmed. It trips
	// "push-confirmed-loaded".
	MutantConfirmOnReload
)

func (m Mutant) String() string {
	switch m {
	case MutantNone:
		return "none"
	case MutantWriteUnpublished:
		return "write-unpublished"
	case MutantRegress:
		return "regress"
	case MutantNoReloadRetry:
		return "no-reload-retry"
	case MutantNoStrayWait:
		return "no-stray-wait"
	case MutantReloadEarly:
		return "reload-early"
	case MutantSilentGiveUp:
		return "silent-give-up"
	case MutantSeenAny:
		return "seen-any"
	case MutantConfirmOnReload:
		return "confirm-on-reload"
	}
	return "unknown"
}

const (
	defaultStepTimeout = 10 * time.Second
	defaultBackoff     = 500 * time.Millisecond
	defaultMaxBackoff  = 10 * time.Second
	defaultMaxAttempts = 5
	defaultAwait       = 30
)

// WithDefaults returns o with its zero fields filled: the options New runs with.
func (o Options) WithDefaults() Options {
	if o.StepTimeout <= 0 {
		o.StepTimeout = defaultStepTimeout
	}
	if o.Backoff <= 0 {
		o.Backoff = defaultBackoff
	}
	if o.MaxBackoff < o.Backoff {
		o.MaxBackoff = max(defaultMaxBackoff, o.Backoff)
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = defaultMaxAttempts
	}
	if o.AwaitAttempts <= 0 {
		o.AwaitAttempts = defaultAwait
	}
	return o
}
