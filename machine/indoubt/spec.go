package indoubt

// Spec is the TLA+ spec whose actions this machine's SpecEvents name
// (spec/tla/router/CrossShardCommit.tla). The spec's other actions are the coordinator's
// (prepare, decide, commit or roll back prepared); the monitor's are prefixed Monitor, and
// none of them changes a transaction: the spec's monitor only observes and alerts.
const Spec = "CrossShardCommit"

// The actions this machine emits.
const (
	// ActTrack: the set of shards to scan was set; fields shards (how many).
	ActTrack = "MonitorTrack"
	// ActRound: a scan round started; fields round, shards.
	ActRound = "MonitorRound"
	// ActScan: one shard's prepared transactions arrived (or did not); fields round, shard,
	// ok, and prepared (how many) and xacts ("gid@origin,...": what it aged each from) or err.
	ActScan = "MonitorScan"
	// ActRoster: the live coordinator processes arrived (or did not); fields round, ok, and
	// instances and procs ("id@started,...") or err.
	ActRoster = "MonitorRoster"
	// ActAlert: an alert was raised or its content changed; fields id, reason, txns (how
	// many) and gids (its branches, "gid,...").
	ActAlert = "MonitorAlert"
	// ActClear: an alert's cause went away; fields id.
	ActClear = "MonitorClear"
	// ActDeliver: the alert sink acknowledged a delivery, or failed; fields id, clear, ok
	// (and err).
	ActDeliver = "MonitorDeliver"
	// ActRestart: the monitor was restored from a snapshot; fields round.
	ActRestart = "MonitorRestart"
)

// Actions lists every action this machine emits, for the spec coverage check.
var Actions = []string{ActTrack, ActRound, ActScan, ActRoster, ActAlert, ActClear, ActDeliver, ActRestart}
