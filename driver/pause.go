package driver

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// PauseReport is where a cutover's write pause went, read from a Timeline by CutoverPause:
// the window every write waits out (the first Pause sent to the last Resume answered OK of
// the same direction), step by step, each command with its wall time, and the time between
// commands that is the driver's own. It is what `loamrouter cutover status` and the HTML
// report draw as the pause's timeline; its JSON is stable for them.
type PauseReport struct {
	// Start is when the first Pause was sent; Window runs from it to the end of the last
	// Resume that answered OK.
	Start  time.Time     `json:"start"`
	Window time.Duration `json:"window_ns"`
	// Commands is the time inside the window during which at least one command was
	// executing, its audit writes left out: what the routers, Postgres and the store take.
	// Controller is the rest (Window - Commands): snapshot saves, audit writes, retry
	// waits, the machine's steps and the driver's scheduling.
	Commands   time.Duration `json:"commands_ns"`
	Controller time.Duration `json:"controller_ns"`
	// Costs splits Controller the way each PauseStep does.
	Costs PauseCosts  `json:"costs"`
	Steps []PauseStep `json:"steps"`
	// FromAudit: read from the audit log (PauseFromAudit), which does not hold the snapshot
	// saves, the timers or the scheduling: Costs' Save, Wait and Feed are in Other.
	FromAudit bool `json:"from_audit,omitempty"`
}

// PauseCosts splits the time no command was executing. Each instant counts once, in the
// first of these it falls in.
type PauseCosts struct {
	Audit time.Duration `json:"audit_ns"` // audit writes (in the critical path of a command)
	Save  time.Duration `json:"save_ns"`  // snapshot saves before a step's commands
	Wait  time.Duration `json:"wait_ns"`  // timers: retry delays, poll intervals
	Feed  time.Duration `json:"feed_ns"`  // replies waiting to be fed: scheduling, a busy loop
	Other time.Duration `json:"other_ns"` // the rest: the machine's On, dispatch
}

// PauseStep is one stage of the pause ("pause", "fence", "cutover", "resolve", "repause",
// "publish", "open", "files", "reload", "resume"): from its first command sent to the next
// stage's first command sent (the last one ends with the window).
type PauseStep struct {
	Stage string `json:"stage"`
	// Offset is the stage's start from PauseReport.Start.
	Offset   time.Duration  `json:"offset_ns"`
	Wall     time.Duration  `json:"wall_ns"`
	Busy     time.Duration  `json:"busy_ns"` // at least one command executing (audit writes left out)
	Costs    PauseCosts     `json:"costs"`
	Commands []PauseCommand `json:"commands"`
}

// PauseCommand is one command of a stage, one attempt.
type PauseCommand struct {
	Step   string        `json:"step"`
	Target string        `json:"target"` // the instance, the shard, "store", "files"
	What   string        `json:"what"`
	Result string        `json:"result"`    // "ok" or the error
	Offset time.Duration `json:"offset_ns"` // from PauseReport.Start
	Wall   time.Duration `json:"wall_ns"`   // Execute called to returned
	Audit  time.Duration `json:"audit_ns"`  // of Wall, the audit writes (Audited with the Timeline)
}

// CutoverPause reads the first write pause of a cutover out of the spans of a Timeline
// given to the cutover's Run (and to its Audited executor, if any). ok is false when the
// spans hold no pause that ended (no Pause sent, or no Resume answered OK after it).
func CutoverPause(spans []Span) (rep PauseReport, ok bool) {
	var dir string
	var start, end time.Time
	for _, s := range spans {
		if s.Kind != SpanExec {
			continue
		}
		d, st := cutoverStage(s.Step)
		switch {
		case start.IsZero() && st == "pause":
			dir, start = d, s.Start
		case !start.IsZero() && d == dir && st == "resume" && s.Result == "ok" && s.End.After(end):
			end = s.End
		}
	}
	if start.IsZero() || end.IsZero() {
		return PauseReport{}, false
	}
	rep.Start, rep.Window = start, end.Sub(start)
	var exec, audit, save, wait, feed []interval
	index := map[string]int{}
	for _, s := range spans {
		if s.End.Before(start) || s.Start.After(end) {
			continue // (a command of no measurable length that starts as the window ends is in it)
		}
		iv := interval{s.Start, s.End}
		switch s.Kind {
		case SpanExec:
			exec = append(exec, iv)
			d, st := cutoverStage(s.Step)
			if d != dir || s.Start.Before(start) {
				continue
			}
			i, seen := index[st]
			if !seen {
				i = len(rep.Steps)
				index[st] = i
				rep.Steps = append(rep.Steps, PauseStep{Stage: st, Offset: s.Start.Sub(start)})
			}
			rep.Steps[i].Commands = append(rep.Steps[i].Commands, PauseCommand{Step: s.Step, Target: s.Target, What: s.What, Result: s.Result,
				Offset: s.Start.Sub(start), Wall: s.Duration()})
		case SpanAudit:
			if strings.HasPrefix(s.What, AuditExec+" ") {
				// Result and report entries are written off the command's path (Audited).
				audit = append(audit, iv)
			}
		case SpanSave:
			save = append(save, iv)
		case SpanTimer:
			wait = append(wait, iv)
		case SpanFeed:
			feed = append(feed, iv)
		}
	}
	a := union(audit)
	c := union(exec).minus(a)
	a = a.minus(c)
	sv := union(save).minus(c).minus(a)
	w := union(wait).minus(c).minus(a).minus(sv)
	f := union(feed).minus(c).minus(a).minus(sv).minus(w)
	costs := func(lo, hi time.Time) (time.Duration, PauseCosts) {
		busy := c.within(lo, hi)
		pc := PauseCosts{Audit: a.within(lo, hi), Save: sv.within(lo, hi), Wait: w.within(lo, hi), Feed: f.within(lo, hi)}
		pc.Other = hi.Sub(lo) - busy - pc.Audit - pc.Save - pc.Wait - pc.Feed
		return busy, pc
	}
	rep.Commands, rep.Costs = costs(start, end)
	rep.Controller = rep.Window - rep.Commands
	for i := range rep.Steps {
		st := &rep.Steps[i]
		lo, hi := start.Add(st.Offset), end
		if i+1 < len(rep.Steps) {
			hi = start.Add(rep.Steps[i+1].Offset)
		}
		if hi.Before(lo) {
			hi = lo
		}
		st.Wall = hi.Sub(lo)
		st.Busy, st.Costs = costs(lo, hi)
		for j := range st.Commands {
			cm := &st.Commands[j]
			cs := start.Add(cm.Offset)
			cm.Audit = union(audit).within(cs, cs.Add(cm.Wall))
		}
	}
	return rep, true
}

// PauseFromAudit reads the first write pause of a cutover out of its audit entries (those
// of machine "cutover" for one database, in log order: ReadAudit), for a cutover whose
// Timeline is gone: `loamrouter cutover status` and its HTML report draw it. Each result
// (or report) entry gives its command's span, ending at the time the entry's key holds and
// lasting DurationUS (DurationMS for entries written before it); each write of exec entries
// runs from the time its key holds to the first of its commands starting, and counts as
// audit. The driver's snapshot saves, timers and scheduling are not in the log: what
// CutoverPause splits into save, wait and feed is other here.
func PauseFromAudit(entries []AuditEntry) (PauseReport, bool) {
	rep, ok := CutoverPause(AuditSpans(entries))
	rep.FromAudit = ok
	return rep, ok
}

// AuditSpans turns a machine's audit entries into a Timeline's spans: a SpanExec per
// command answered (or reported), a SpanAudit per write of exec entries.
func AuditSpans(entries []AuditEntry) []Span {
	at := func(e AuditEntry) time.Time {
		if t, ok := AuditTime(e.Key); ok && t.UnixMilli() == e.At {
			return t
		}
		return time.UnixMilli(e.At)
	}
	type write struct {
		at         time.Time
		first      time.Time // the first of its commands to start
		what, step string
		n          int
	}
	var writes []*write
	byBlob := map[string]*write{}
	waiting := map[string][]*write{} // exec entries not yet answered, by auditKey
	var spans []Span
	for _, e := range entries {
		switch e.Event {
		case AuditExec:
			blob, _, _ := strings.Cut(e.Key, "#")
			w := byBlob[blob]
			if w == nil {
				w = &write{at: at(e), what: AuditExec + " " + e.What, step: e.Step}
				byBlob[blob] = w
				writes = append(writes, w)
			}
			w.n++
			waiting[auditKey(e)] = append(waiting[auditKey(e)], w)
		case AuditResult, AuditReport:
			end := at(e)
			d := time.Duration(e.DurationUS) * time.Microsecond
			if e.DurationUS == 0 {
				d = time.Duration(e.DurationMS) * time.Millisecond
			}
			start := end.Add(-d)
			spans = append(spans, Span{Kind: SpanExec, Step: e.Step, What: e.What, Target: e.Target, Result: e.Result, Start: start, End: end})
			k := auditKey(e)
			if q := waiting[k]; len(q) > 0 {
				w := q[0]
				waiting[k] = q[1:]
				if w.first.IsZero() || start.Before(w.first) {
					w.first = start
				}
			}
		}
	}
	for _, w := range writes {
		if w.first.After(w.at) {
			spans = append(spans, Span{Kind: SpanAudit, Step: w.step, What: w.what, Result: "ok", N: w.n, Start: w.at, End: w.first})
		}
	}
	slices.SortStableFunc(spans, func(a, b Span) int { return a.Start.Compare(b.Start) })
	return spans
}

// cutoverStage splits a cutover step id ("<db>/<g>[/reverse<n>]/<stage>[/<target>][#<n>]")
// into its direction ("" forward, "reverse<n>") and stage.
func cutoverStage(step string) (dir, stage string) {
	step, _, _ = strings.Cut(step, "#")
	step, _, _ = strings.Cut(step, "@")
	parts := strings.Split(step, "/")
	if len(parts) < 3 {
		return "", ""
	}
	parts = parts[2:]
	if strings.HasPrefix(parts[0], "reverse") {
		dir, parts = parts[0], parts[1:]
	}
	if len(parts) == 0 {
		return dir, ""
	}
	return dir, parts[0]
}

// String draws the report as text, one line per step and one per command, offsets from
// the first Pause: what TestRealCutoverFigures prints.
func (r PauseReport) String() string {
	var b strings.Builder
	ms := pauseMS
	cost := PauseCosts.String
	b.WriteString("pause window " + ms(r.Window) + ": commands " + ms(r.Commands) + ", controller " + ms(r.Controller) + " (" + cost(r.Costs) + ")\n")
	for _, s := range r.Steps {
		b.WriteString("  " + s.Stage + " @" + ms(s.Offset) + ": wall " + ms(s.Wall) + ", commands " + ms(s.Busy) + ", controller " + ms(s.Wall-s.Busy) + " (" + cost(s.Costs) + ")\n")
		for _, c := range s.Commands {
			line := "      @" + ms(c.Offset) + " " + c.Target + " " + ms(c.Wall)
			if c.Audit > 0 {
				line += " (audit " + ms(c.Audit) + ")"
			}
			if c.Result != "ok" {
				line += " failed: " + c.Result
			}
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// pauseMS prints a duration in milliseconds to 0.1 ms, as the pause's drawings do.
func pauseMS(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) + "ms"
}

// String names where the time went: "audit 1.0ms, save 2.0ms, wait 0.0ms, feed 0.1ms,
// other 0.3ms".
func (c PauseCosts) String() string {
	return "audit " + pauseMS(c.Audit) + ", save " + pauseMS(c.Save) + ", wait " + pauseMS(c.Wait) + ", feed " + pauseMS(c.Feed) + ", other " + pauseMS(c.Other)
}
