package indoubt

import "loam.dev/router/machine"

// Command is what the monitor asks its driver to do: read, alert, wait. The set is closed
// (the marker method is unexported) and no command can name an action on a transaction:
// there is no command to commit or roll back a prepared transaction, so no driver can be
// asked to. Without the coordinator's log the monitor cannot know the decision, and
// guessing breaks atomicity (CrossShardCommit.tla); an operator resolves, with the shard
// data in view, by the runbook. TestCommandsCannotResolve checks this by reflection over
// every command type in the package.
//
// The driver executes the commands of one On call in any order and in parallel and feeds
// each reply back; it persists the Snapshot after On returns and before executing them.
// Alert and ClearAlert for the same ID must reach the sink in the order they were issued.
type Command interface{ isCommand() }

// ListPrepared asks the driver to list Shard's prepared transactions (ShardBackend.Prepared:
// a read of pg_prepared_xacts) and answer with Prepared{Step, Shard, Xacts, Err}. Step is
// "r<round>/prepared/<shard>"; a reply to an older round's step is ignored.
type ListPrepared struct {
	Step  string
	Shard string
}

// ListInstances asks the driver to list the database's live router processes with their
// instance ids and start times, and answer with Roster{Step, Processes, Err}. Step is
// "r<round>/roster".
type ListInstances struct {
	Step string
}

// Alert asks the driver to raise, or update, the alert named ID (an upsert: the same ID
// again replaces its content) and answer with Delivered{Step, Err}. Until a delivery is
// acknowledged the monitor sends it again, with the same Step, at every round and after a
// restart, so the sink must take a repeated Step as the same request. Step is
// "r<round>/alert/<id>", the round the content was decided in.
type Alert struct {
	Step   string `json:"step"`
	ID     string `json:"id"`
	Reason Reason `json:"reason"`
	// Deployment and Instance name the coordinator (reasons gone and restarted).
	Deployment string `json:"deployment,omitempty"`
	Instance   string `json:"instance,omitempty"`
	// Shard names the shard (reasons foreign and unscanned).
	Shard string `json:"shard,omitempty"`
	// Txns are the transactions in doubt, oldest first.
	Txns []Txn `json:"txns,omitempty"`
	// Since is when the alert was first raised (ms).
	Since int64 `json:"since"`
}

// Reason says why an alert is raised.
type Reason string

const (
	// ReasonGone: the coordinator instance is not among the live processes; nothing will
	// finish its transactions (without NODE_ID, any restart looks like this).
	ReasonGone Reason = "gone"
	// ReasonRestarted: the coordinator instance runs again but started after the
	// transaction was prepared, and the transaction is still prepared: its recovery did
	// not resolve it (the 2PC WAL was lost, or it rebuilt gids from another id).
	ReasonRestarted Reason = "restarted"
	// ReasonForeign: a prepared transaction that is not PgDog's, or another deployment's,
	// older than the threshold; the monitor cannot know its coordinator.
	ReasonForeign Reason = "foreign"
	// ReasonUnscanned: the shard could not be scanned for BlindAfter rounds in a row; the
	// monitor cannot see what is in doubt there.
	ReasonUnscanned Reason = "unscanned"
	// ReasonStuck: the coordinator runs and started before the transaction was prepared,
	// yet it is still prepared after Options.StuckAfter, which PgDog's retries every 333 ms
	// would not allow: a prepare that reached the shard after its coordinator restarted, or
	// a coordinator that cannot log in to finish it.
	ReasonStuck Reason = "stuck"
)

// Txn is one transaction in doubt: PgDog prepares it under one name per shard.
type Txn struct {
	// Name is the gid without the shard suffix (the whole gid for a foreign one).
	Name string `json:"name"`
	// Prepared is the earliest prepare time seen on any shard (ms).
	Prepared int64  `json:"prepared"`
	Parts    []Part `json:"parts"`
}

// Part is the transaction's prepared branch on one shard: what an operator resolves, on
// that shard's database, as its owner or a superuser.
type Part struct {
	Shard    string `json:"shard"`
	GID      string `json:"gid"`
	Owner    string `json:"owner,omitempty"`
	Database string `json:"database,omitempty"`
}

// ClearAlert asks the driver to resolve the alert named ID — its transactions are no
// longer prepared on any shard, or the shard is visible again — and answer with
// Delivered{Step, Err}. Clearing an alert the sink does not have is not an error. Like
// Alert it is sent again until acknowledged. Step is "r<round>/clear/<id>".
type ClearAlert struct {
	Step string
	ID   string
}

// SetTimer asks the driver to feed TimerFired{ID} once its clock reaches At: the next round.
type SetTimer struct{ machine.SetTimer }

func (ListPrepared) isCommand()  {}
func (ListInstances) isCommand() {}
func (Alert) isCommand()         {}
func (ClearAlert) isCommand()    {}
func (SetTimer) isCommand()      {}
