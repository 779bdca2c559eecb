package check

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"loam.dev/router/detsim"
	"loam.dev/router/machine/cutover"
)

// The cutover's step invariants (§6.4's order of steps 2–6), checked at the moment of the
// effect they are about. They are the same code in both tiers: the cutover machine's world
// test (machine/cutover, world_test.go) calls them as its world applies each record write
// and RESUME, and the simulator's cutover scenarios as their executor applies them to the
// models (detsim/scenario, cutover.go). Before they were shared, the simulator looked only
// at the clients' history and the end state, so a scenario run with faults could publish
// out of order and pass as long as no write happened to be lost in between.
const (
	// InvPublishFenced: a record write that moves the database's routing off a layout
	// commits only while every shard of that layout is fenced, so nothing the layout
	// takes after the publish is stranded on shards the new generation does not serve.
	InvPublishFenced = "cutover-publish-fenced"
	// InvPublishAfterCutover: such a write commits only once this direction's CUTOVER
	// has taken effect on the designated instance (its stream carried the last writes
	// and a stream runs back): before, a rollback or a failed swap would leave the store
	// routing where the data is not.
	InvPublishAfterCutover = "cutover-publish-after-cutover"
	// InvResumeOpen: an instance resumes only onto the stored generation's layout with
	// every shard of it open, and, once the CUTOVER took effect, only after the
	// generation routing to the layout it moved to is stored. Resumed earlier, its held
	// writes meet a fence (refused) or a layout no record routes to.
	InvResumeOpen = "cutover-resume-open"
)

// Move is one record write that moves routing from one layout to the other, as it
// commits.
type Move struct {
	T          int64
	Generation uint64
	// Reverse: routing moves back to the layout the cutover started from.
	Reverse bool
	// Leaves are the shards of the layout routing moves off; Fenced tells whether one is
	// fenced as the write commits.
	Leaves []string
	Fenced func(shard string) bool
	// Cut: this direction's CUTOVER took effect on Designated since routing last moved
	// (and the instance kept it: a restart since routes it by the files again).
	Cut        bool
	Designated string
}

// Publish checks InvPublishFenced and InvPublishAfterCutover for one write.
func Publish(m Move) *detsim.Violation {
	for _, s := range m.Leaves {
		if !m.Fenced(s) {
			return &detsim.Violation{Invariant: InvPublishFenced, T: m.T,
				Detail: fmt.Sprintf("generation %d published while shard %s of the layout it moves routing off is not fenced", m.Generation, s)}
		}
	}
	if m.Cut {
		return nil
	}
	d := fmt.Sprintf("generation %d published before CUTOVER took effect on %s", m.Generation, m.Designated)
	if m.Reverse {
		d = fmt.Sprintf("generation %d published before the reverse CUTOVER took effect on %s", m.Generation, m.Designated)
	}
	return &detsim.Violation{Invariant: InvPublishAfterCutover, T: m.T, Detail: d}
}

// Resumed is one instance's RESUME taking effect during a cutover.
type Resumed struct {
	T        int64
	Instance string
	// Stored is the stored generation and Serves the shards of the layout it routes to;
	// Fenced tells whether one is fenced as the RESUME takes effect.
	Stored uint64
	Serves []string
	Fenced func(shard string) bool
	// Unpublished, when not zero, is the generation routing to the layout a CUTOVER that
	// took effect moved the designated instance to, not stored yet.
	Unpublished uint64
}

// Resume checks InvResumeOpen for one RESUME.
func Resume(r Resumed) *detsim.Violation {
	if r.Unpublished != 0 {
		return &detsim.Violation{Invariant: InvResumeOpen, T: r.T,
			Detail: fmt.Sprintf("%s resumed while generation %d is not published (CUTOVER took effect)", r.Instance, r.Unpublished)}
	}
	for _, s := range r.Serves {
		if r.Fenced(s) {
			return &detsim.Violation{Invariant: InvResumeOpen, T: r.T,
				Detail: fmt.Sprintf("%s resumed while shard %s of the stored generation %d is fenced", r.Instance, s, r.Stored)}
		}
	}
	return nil
}

// InvClaims is the cutover's false-alarm invariant: Done names in Missed, Lagging and
// Unresumed only instances that did not answer its PAUSE, RELOAD or RESUME. An instance
// every one of whose PAUSEs (RELOADs, RESUMEs) an attempt answered OK is not one: named,
// the operator goes to resume or reload by hand an instance that is fine, and the list
// hides the one that is not. It is also the check of the machine's reply matching: the
// answers are the world's (the first answer of each attempt, as the world gave it), so a
// machine that takes a late failure of an earlier attempt for its retry's names an
// instance whose retry was answered OK.
const InvClaims = "cutover-claims"

// Hold kinds for Answered.
const (
	KindPause  = "PAUSE"
	KindReload = "RELOAD"
	KindResume = "RESUME"
)

// Answered is what the world answered the attempts of one of a cutover's commands to an
// instance (one step, all its attempts): OK when one of them was answered OK.
type Answered struct {
	Instance, Kind string
	OK             bool
}

// Claims checks InvClaims on a Done's lists against the answers, by step id without its
// attempt. An instance with no command of the kind is not judged.
func Claims(t int64, d cutover.Done, answers map[string]Answered) *detsim.Violation {
	for _, l := range []struct {
		kind, list string
		names      []string
	}{{KindPause, "Missed", d.Missed}, {KindReload, "Lagging", d.Lagging}, {KindResume, "Unresumed", d.Unresumed}} {
		for _, i := range l.names {
			sent, ok := 0, 0
			for _, a := range answers {
				if a.Instance == i && a.Kind == l.kind {
					sent++
					if a.OK {
						ok++
					}
				}
			}
			if sent > 0 && ok == sent {
				return &detsim.Violation{Invariant: InvClaims, T: t,
					Detail: fmt.Sprintf("Done lists %s in %s, but each of the %d %s steps sent to it had an attempt answered OK", i, l.list, sent, l.kind)}
			}
		}
	}
	return nil
}

// InvFencesAtDone is the cutover's belief about each shard's fence, held against the world
// when it reports Done: the Outcome says which shards stay fenced, and the operator acts on
// it. Finalized: the destination open, and the source too unless Done names an instance
// Lagging (the fence stays on the old shards for it); RolledBack: the source open, the
// destination fenced exactly where a fence reached it (a CUTOVER landing after the machine
// gave up may swap the designated instance there, and its writes must be refused);
// Reversed: the source open, the destination fenced; Aborted: no source shard fenced.
// Halted leaves it to the operator and is not judged.
const InvFencesAtDone = "cutover-fences-at-done"

// FenceState is a shard's fence as the world has it when Done is reported.
type FenceState struct {
	Shard string
	// Fenced is whether the writes are refused now; Ever whether a fence took effect on
	// the shard during the cutover.
	Fenced, Ever bool
}

// FencesAtDone checks InvFencesAtDone for a Done against the source and destination
// shards' fences at time t.
func FencesAtDone(t int64, d cutover.Done, src, dst []FenceState) *detsim.Violation {
	outcome := d.Outcome
	bad := func(f FenceState, want bool, why string) *detsim.Violation {
		return &detsim.Violation{Invariant: InvFencesAtDone, T: t,
			Detail: fmt.Sprintf("%v: shard %s fenced=%v, want %v (%s)", outcome, f.Shard, f.Fenced, want, why)}
	}
	srcOpen := outcome == cutover.RolledBack || outcome == cutover.Reversed || outcome == cutover.Aborted ||
		outcome == cutover.Finalized && len(d.Lagging) == 0
	for _, f := range src {
		if srcOpen && f.Fenced {
			return bad(f, false, "traffic is on the source layout, or nothing is left to fence it for")
		}
	}
	for _, f := range dst {
		switch outcome {
		case cutover.Finalized:
			if f.Fenced {
				return bad(f, false, "traffic moved to the destination")
			}
		case cutover.RolledBack:
			if f.Fenced != f.Ever {
				return bad(f, f.Ever, "a rollback leaves the destination fenced where a fence reached it")
			}
		case cutover.Reversed:
			if !f.Fenced {
				return bad(f, true, "the reverse moved traffic back to the source")
			}
		}
	}
	return nil
}

// InvRetryAlert is the cutover's false-alarm invariant for its retry alerts: an Alert that
// says a command "failed N times" follows N failed answers, each to its own attempt (a
// step id of its own: the command's step, then step#2, step#3, ...; a record write's step
// also names the version it expects, step@v, which a rebase on a harmless rewrite changes
// without starting the count again). One raised sooner
// sends the operator after an instance or shard that answered, and is how a machine that
// takes a late or duplicated failure of an earlier attempt for its retry's shows.
const InvRetryAlert = "cutover-retry-alert"

// failedTimes is the retry alert's claim (machine/cutover's fail: "<command> failed N
// times (<error>); retrying until it succeeds"). Alerts that count another step's failures
// (the COPY_DATA tries an adopt gave up on) are not judged.
var failedTimes = regexp.MustCompile(`failed (\d+) times \(.*\); retrying until it succeeds`)

// Failures counts the failed answers a cutover machine was given, per attempt: feed it
// every Reply the machine takes. Use NewFailures.
type Failures struct {
	failed map[string]map[string]bool // base step -> attempt steps answered with an error
}

// NewFailures returns a counter that has seen nothing.
func NewFailures() *Failures { return &Failures{failed: map[string]map[string]bool{}} }

// Answer records an answer the machine takes for step (an attempt's step id).
func (f *Failures) Answer(step string, err error) {
	if err == nil {
		return
	}
	base := failureBase(step)
	if f.failed[base] == nil {
		f.failed[base] = map[string]bool{}
	}
	f.failed[base][step] = true
}

// Alert checks InvRetryAlert for an Alert the machine raised at t. An alert that is not a
// retry alert is not judged.
func (f *Failures) Alert(t int64, step, reason string) *detsim.Violation {
	m := failedTimes.FindStringSubmatch(reason)
	if m == nil {
		return nil
	}
	n, _ := strconv.Atoi(m[1])
	if got := len(f.failed[failureBase(step)]); got < n {
		return &detsim.Violation{Invariant: InvRetryAlert, T: t,
			Detail: fmt.Sprintf("Alert %s says it failed %d times, but %d of its attempts were answered with an error", step, n, got)}
	}
	return nil
}

// failureBase is the command a step id's attempts share: without #attempt and @version.
func failureBase(step string) string {
	base, _, _ := strings.Cut(step, "#")
	base, _, _ = strings.Cut(base, "@")
	return base
}

// AnswerOf is the step a cutover input answers and the error that counts as that attempt's
// failure: nil for a success, and ("", nil) for an input that answers no command. A record
// write's conflict is not a failure (the machine rebases or ends on it).
func AnswerOf(in cutover.Input) (step string, err error) {
	switch in := in.(type) {
	case cutover.Reply:
		return in.Step, in.Err
	case cutover.RecordWritten:
		if in.Conflict == nil {
			return in.Step, in.Err
		}
	case cutover.CopyStarted:
		return in.Step, in.Err
	case cutover.CopyPolled:
		return in.Step, in.Err
	case cutover.TasksListed:
		return in.Step, in.Err
	}
	return "", nil
}

// InvStuckAlert is the cutover's false-alarm invariant for the alert that its CUTOVER is
// still running ("CUTOVER <id> on <instance> is still <state> after N listings"): the
// listing the alert was raised on (an attempt of its step) is one the world answered, and
// the world listed that task in that state, not ended (cutting over, stopping, unknown).
// One raised otherwise
// tells the operator every instance is held by a CUTOVER that ended, and is how a machine
// that takes another listing's answer (an earlier poll's, late or duplicated) for this
// one's shows.
const InvStuckAlert = "cutover-stuck-alert"

var stillRunning = regexp.MustCompile(`^CUTOVER (\d+) on \S+ is still (\S+) after \d+ listings`)

// StuckAlert checks InvStuckAlert for an Alert the machine raised at t on step; listed is
// what the world answered each SHOW TASKS attempt (step, step#2, ...) with. An alert of
// another kind is not judged.
func StuckAlert(t int64, step, reason string, listed map[string][]cutover.Task) *detsim.Violation {
	m := stillRunning.FindStringSubmatch(reason)
	if m == nil {
		return nil
	}
	id, _ := strconv.ParseInt(m[1], 10, 64)
	seen := "none"
	for _, attempt := range slices.Sorted(maps.Keys(listed)) {
		if failureBase(attempt) != failureBase(step) {
			continue
		}
		seen = "without it"
		for _, k := range listed[attempt] {
			if k.ID != id {
				continue
			}
			switch k.State {
			case cutover.TaskCuttingOver, cutover.TaskStopping, cutover.TaskUnknown:
				if k.State.String() == m[2] {
					return nil
				}
			}
			seen = "listing it " + k.State.String()
		}
	}
	return &detsim.Violation{Invariant: InvStuckAlert, T: t,
		Detail: fmt.Sprintf("Alert %s says CUTOVER %d is still %s, but the world's answers to that listing: %s", step, id, m[2], seen)}
}

// fenceKept is the alert the cutover raises instead of opening the old shards when some
// instances never reloaded the new generation (machine/cutover's unfence stage: "fence
// kept on the old shards: (a,b) never reloaded generation G; ...").
var fenceKept = regexp.MustCompile(`^fence kept on the old shards: \(([^)]*)\) never reloaded generation \d+`)

// FenceKeptAlert checks InvClaims for that alert when the machine raises it at t: the
// instances it names are ones a RELOAD did not answer OK, as for Done's Lagging (the fence
// stays on because of them, and the operator is sent to reload them). An alert of another
// kind is not judged.
func FenceKeptAlert(t int64, reason string, answers map[string]Answered) *detsim.Violation {
	m := fenceKept.FindStringSubmatch(reason)
	if m == nil {
		return nil
	}
	v := Claims(t, cutover.Done{Lagging: strings.Split(m[1], ",")}, answers)
	if v != nil {
		v.Detail = "the fence-kept alert, like " + v.Detail
	}
	return v
}
