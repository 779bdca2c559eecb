package cutover

import "loam.dev/router/kernel/shardmap"

// stage is where the machine is. Stages from pause to resume run in both directions: the
// forward cutover and, after the point of no return, the reverse one (state.Reverse).
type stage uint8

const (
	stIdle stage = iota
	stBegin
	stCopy
	stCatchUp
	stPause
	stFence
	stCutover
	stResolve
	stRepause
	stPublish
	stFiles
	stReload
	stOpen
	stResume
	stServing
	stStop
	stGrace
	stUnfence
	stFinish
	stUndoReload
	stUndoUnfence
	stUndoResume
	stUndoStop
	stUndoRecord
	stDone
	// Stages added later come last so the numbers of the stages before them, kept in
	// snapshots, do not change: stFinalReload (forward finalize, after the stop), stCheck
	// and stCheckReload (after the forward resume, before serving).
	stFinalReload
	stCheck
	stCheckReload
	// stSettle (a reverse, Options.ReverseSettle): between the reload and the open.
	stSettle
)

// stageNames are the middle part of step ids, so they are part of the protocol: changing
// one makes a restarted driver's retries unrecognisable.
var stageNames = [...]string{
	stIdle: "idle", stBegin: "begin", stCopy: "copy", stCatchUp: "catchup", stPause: "pause",
	stFence: "fence", stCutover: "cutover", stResolve: "resolve", stRepause: "repause",
	stPublish: "publish", stFiles: "files", stReload: "reload", stOpen: "open",
	stResume: "resume", stServing: "serving", stStop: "stop", stGrace: "grace",
	stUnfence: "unfence", stFinish: "finish", stUndoReload: "undo/reload",
	stUndoUnfence: "undo/unfence", stUndoResume: "undo/resume", stUndoStop: "undo/stop",
	stUndoRecord: "undo/record", stDone: "done", stFinalReload: "final/reload",
	stCheck: "check", stCheckReload: "check/reload", stSettle: "settle",
}

func (s stage) String() string { return stageNames[s] }

// The order of steps 2–6. The forward cutover runs begin, copy and catch-up first and
// ends serving; the reverse one ends by stopping the stream the reverse CUTOVER started.
// Open (the layout traffic moves to, unfenced) comes right after the publish: the
// designated instance's CUTOVER released its holds, so what it took since is refused by
// that fence until then, and the files and reloads need not wait for it.
var (
	stepsNormal               = []stage{stPause, stFence, stCutover, stResolve, stRepause, stPublish, stOpen, stFiles, stReload, stResume}
	stepsReverseSettle        = []stage{stPause, stFence, stCutover, stResolve, stRepause, stPublish, stFiles, stReload, stSettle, stOpen, stResume}
	stepsPublishBeforeCutover = []stage{stPause, stFence, stPublish, stOpen, stFiles, stReload, stCutover, stResolve, stRepause, stResume}
	stepsResumeBeforePublish  = []stage{stPause, stFence, stCutover, stResolve, stRepause, stResume, stPublish, stOpen, stFiles, stReload}
	stepsFilesBeforePublish   = []stage{stPause, stFence, stCutover, stResolve, stRepause, stFiles, stReload, stPublish, stOpen, stResume}
)

type opKind uint8

const (
	kRecord opKind = iota + 1
	kCopy
	kAdopt
	kPoll
	kPause
	kFence
	kUnfence
	kCutover
	kList
	kFiles
	kReload
	kResume
	kStop
	kCheck // ListTasks on d after the forward resume: is the reverse stream still there?
)

type opState uint8

const (
	opSent    opState = iota + 1 // the command is out; its answer is awaited
	opWaiting                    // it failed and waits for its retry timer
	opOK
	opFailed // it failed for good; the stage decides what that means
)

// side names a layout of the start record.
type side uint8

const (
	sideSource side = iota + 1 // Origin.Layout
	sideTarget                 // *Origin.Target
)

// op is one command of the current stage and what became of it.
type op struct {
	Step    string
	Kind    opKind
	Target  string // instance or shard name
	Side    side   // for shard ops: which layout Target is in
	Index   int    // for shard ops: the shard's index in that layout
	Task    int64  // for Cutover, StopTask, PollCopy
	State   opState
	Attempt int // attempts answered with a failure; the one in flight is Attempt+1 (see sent)
	RetryAt int64
	Alerted bool
	Rebases int
	Err     string
}

// timer is a pending timer the machine asked for (retry timers live on their op).
type timer struct {
	ID string
	At int64
}

type decision uint8

const (
	decNone decision = iota
	decFinalize
	decReverse
)

// state is everything the machine knows; Snapshot carries it whole.
type state struct {
	Plan Plan
	// Origin is the record Start was given: generation g, the source layout, the target.
	Origin *shardmap.Record
	// Rec is the last record known to be stored, with its version.
	Rec *shardmap.Record
	// Next is the record the WriteRecord in flight stores.
	Next *shardmap.Record

	Stage   stage
	Reverse bool // running steps 2–6 the other way
	Round   int  // which reverse attempt (step ids of a reverse carry it)
	Ops     []op
	Open    int // ops of the stage not yet settled
	Timers  []timer

	Task          taskRef // the COPY_DATA task
	ReverseTask   taskRef // the stream the forward CUTOVER started (new shards to old)
	ReReverseTask taskRef // the stream the reverse CUTOVER started
	CopyFrom      int64   // when the first CopyData went out (the catch-up deadline counts from it)
	Polls         int     // polls in the current stage (catch-up or resolve), for step ids
	LastLag       int64
	CutoverTries  int
	CutoverOK     bool // the CUTOVER of the current direction answered OK
	PastPNR       bool // the forward CUTOVER took effect: only forward or reverse from here

	// What the current direction has done, so an undo does exactly that much.
	PauseSent  bool
	FenceSent  bool
	ReloadDesg bool // the designated instance's routing may have changed in memory
	// FinalReloaded: finalize's reload of d has run (false in a snapshot saved before the
	// stage existed, which restart then runs before the grace ends).
	FinalReloaded bool
	// Checked: after the forward resume, d was found on the layout g+1 routes to (its
	// reverse stream still ran, or it was reloaded onto the files of g+1), where a restart
	// keeps it, since those files are in place. Finalize's reload of d is then tidying,
	// and its failure keeps no fence.
	Checked bool
	// StaleReverseCut: a reverse round that sent a CUTOVER was rolled back. That CUTOVER
	// may still land (a request the machine read as failed), finishing the reverse stream
	// while the new layout serves, so in a later round a finished stream or a new one is
	// not evidence that this round's CUTOVER took effect.
	StaleReverseCut bool

	Abort    bool // Reverse arrived before the point of no return
	Decision decision

	Missed, Lagging, Unresumed []string
	Outcome                    Outcome
	Reason                     string
}

// Clone is a deep copy (machine.State).
func (s state) Clone() state {
	c := s
	c.Plan.Instances = append([]string(nil), s.Plan.Instances...)
	c.Origin = s.Origin.Clone()
	c.Rec = s.Rec.Clone()
	c.Next = s.Next.Clone()
	c.Ops = append([]op(nil), s.Ops...)
	c.Timers = append([]timer(nil), s.Timers...)
	c.Missed = append([]string(nil), s.Missed...)
	c.Lagging = append([]string(nil), s.Lagging...)
	c.Unresumed = append([]string(nil), s.Unresumed...)
	return c
}
