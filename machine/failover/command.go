package failover

import (
	"strconv"
	"strings"

	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
)

// Command is what the machine asks the driver to do. The machine has at most one command
// in flight (besides Alert and Done, which are not answered). Before executing it the
// driver persists Snapshot(). Step ids are "<db>/<shard>/<g>/<stage>", g the generation the
// failover started from, so a command sent again after a failure or a restart keeps its
// id; every command is idempotent. Attempt counts the sends of one step from 1; the answer
// echoes it, so an answer to an earlier send is not taken for the current one's.
type Command interface {
	isCommand()
	String() string
}

// FenceOld asks for the old primary to stop taking the application's writes
// (ShardBackend.FenceWrites on Backend: NOLOGIN and its sessions terminated, for Postgres).
// Answer with Reply. After Attempts failures the machine goes on without the fence (the old
// primary is usually down) and says so with an Alert.
type FenceOld struct {
	Step    string
	Attempt int
	Shard   string
	Backend shardmap.Backend
	Role    string
}

// Reparent asks Vitess to take Tablet as the primary of Shard in Keyspace:
// vtctldclient TabletExternallyReparented <tablet>. Answer with Reply. Only for Vitess
// keyspaces, and before the record changes: the record mirrors Vitess's topology.
type Reparent struct {
	Step                    string
	Attempt                 int
	Keyspace, Shard, Tablet string
}

// WriteRecord asks for a compare-and-set of Record, expecting the stored version Expect.
// Answer with RecordWritten.
type WriteRecord struct {
	Step    string
	Attempt int
	Expect  uint64
	Record  *shardmap.Record
}

// Push hands Generation, stored as Record, to ConfigPush: render Record's files and start
// (or supersede) the push of that generation to every instance of the database. Answer with
// Reply once ConfigPush has accepted it (a push of the same generation again is harmless).
// Only for PgDog databases.
type Push struct {
	Step       string
	Attempt    int
	Generation uint64
	Record     *shardmap.Record
}

// Alert asks for an operator's attention; nothing is answered.
type Alert struct {
	Step, Reason string
}

// Done reports the end; nothing is answered and later inputs are ignored. Generation is
// the record's generation the machine knows of; Fenced says whether the old primary was
// fenced.
type Done struct {
	Outcome    Outcome
	Generation uint64
	Fenced     bool
	Reason     string
}

// SetTimer asks the driver to feed TimerFired{ID} once its clock reaches At.
type SetTimer struct{ machine.SetTimer }

// Outcome is how a failover ended.
type Outcome uint8

const (
	// Repointed: the record names the promoted primary at a new generation, and (Vitess)
	// the tablet was reparented or (PgDog) ConfigPush has the generation.
	Repointed Outcome = iota + 1
	// Refused: the start request was invalid; nothing was done.
	Refused
	// Failed: the record moved on so that the repoint no longer applies (the shard is gone
	// from it, or it kept changing), or a command was refused for good (Reply.Permanent,
	// e.g. the promoted tablet serves another shard); Reason says what to do.
	Failed
)

var outcomeNames = []string{Repointed: "repointed", Refused: "refused", Failed: "failed"}

func (o Outcome) String() string {
	if o != 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

func (FenceOld) isCommand()    {}
func (Reparent) isCommand()    {}
func (WriteRecord) isCommand() {}
func (Push) isCommand()        {}
func (Alert) isCommand()       {}
func (Done) isCommand()        {}
func (SetTimer) isCommand()    {}

func (c FenceOld) String() string {
	return "FenceOld step=" + c.Step + " shard=" + c.Shard + " backend=" + backendAddr(c.Backend) + " role=" + c.Role
}
func (c Reparent) String() string {
	return "Reparent step=" + c.Step + " keyspace=" + c.Keyspace + " shard=" + c.Shard + " tablet=" + c.Tablet
}
func (c WriteRecord) String() string {
	l, i, _ := findShard(c.Record, shardOf(c.Step))
	s := "WriteRecord step=" + c.Step + " expect=" + strconv.FormatUint(c.Expect, 10) + " gen=" + strconv.FormatUint(c.Record.Generation, 10)
	if l != nil {
		s += " backend=" + backendAddr(l.Shards[i].Backend)
	}
	return s
}
func (c Push) String() string {
	return "Push step=" + c.Step + " gen=" + strconv.FormatUint(c.Generation, 10)
}
func (c Alert) String() string { return "Alert step=" + c.Step + " reason=" + c.Reason }
func (c Done) String() string {
	s := "Done outcome=" + c.Outcome.String() + " gen=" + strconv.FormatUint(c.Generation, 10) + " fenced=" + strconv.FormatBool(c.Fenced)
	if c.Reason != "" {
		s += " reason=" + c.Reason
	}
	return s
}
func (c SetTimer) String() string {
	return "SetTimer id=" + c.ID + " at=" + strconv.FormatInt(c.At, 10)
}

func backendAddr(b shardmap.Backend) string {
	s := b.Host + ":" + strconv.Itoa(int(b.Port))
	if b.Database != "" {
		s += "/" + b.Database
	}
	if b.Tablet != "" {
		s += " tablet=" + b.Tablet
	}
	return s
}

// shardOf reads the shard name back from a step id "<db>/<shard>/<g>/<stage>".
func shardOf(step string) string {
	step, _, _ = strings.Cut(step, "@")
	parts := strings.Split(step, "/")
	if len(parts) < 4 {
		return ""
	}
	return parts[1]
}
