package configpush

// Spec is the spec whose actions this machine's SpecEvents name (the Quint model spec/ShardMap.qnt).
const Spec = "ShardMap"

// The actions this machine emits, one per kind of transition. Every SpecEvent carries "gen"
// (the generation being pushed) first, so a trace can be filtered by generation.
const (
	// ActPush: a Push was accepted; fields gen, version (the record version it was read at),
	// instances (how many).
	ActPush = "Push"
	// ActRefuse: a Push was refused and nothing was written; fields gen, published (the
	// record's generation), reason.
	ActRefuse = "Refuse"
	// ActWriteFiles: the files write for gen answered; fields gen, attempt, ok (and err).
	ActWriteFiles = "WriteFiles"
	// ActReload: an instance's RELOAD answered; fields gen, instance, attempt, ok (and err).
	ActReload = "Reload"
	// ActFilesSeen: an instance said which generation of the files it sees (with
	// Options.AwaitFiles); fields gen, instance, attempt, ok, seen (and err). seen below gen
	// is retried after a backoff; the instance is reloaded only once seen reaches gen.
	ActFilesSeen = "FilesSeen"
	// ActObserve: an instance reported what it routes by; fields gen, instance, attempt, ok,
	// observed, known (and err). known=false is PgDog's normal answer when the renderer
	// left no trace of the generation in what SHOW POOLS reveals.
	ActObserve = "Observe"
	// ActTimeout: a step's reply did not arrive by its deadline; fields gen, step, attempt.
	ActTimeout = "Timeout"
	// ActRetry: a failed step is tried again after its backoff; fields gen, step, attempt.
	ActRetry = "Retry"
	// ActGiveUp: a step failed MaxAttempts times; fields gen, step, attempts. The instance
	// (or, for the files step, the whole push) is reported in Outcome, not waited on.
	ActGiveUp = "GiveUp"
	// ActSupersede: a newer generation replaced the push in progress; fields gen (the old
	// one), by (the new one).
	ActSupersede = "Supersede"
	// ActDone: every instance of the push reached an end; fields gen, confirmed, ahead,
	// unknown, stuck (counts), files_ok.
	ActDone = "Done"
	// ActRestart: the machine was restored from a snapshot and re-issued what was in
	// flight; fields gen, reissued (how many commands).
	ActRestart = "Restart"
)

// Actions lists every action this machine emits, for the spec coverage check.
var Actions = []string{
	ActPush, ActRefuse, ActWriteFiles, ActFilesSeen, ActReload, ActObserve, ActTimeout, ActRetry,
	ActGiveUp, ActSupersede, ActDone, ActRestart,
}
