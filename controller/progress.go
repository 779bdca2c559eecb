package controller

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"loam.dev/router/driver"
)

// The seven steps of §6.4 as `cutover status` shows them, and the machine's stages (the
// middle part of its step ids) that belong to each.
var cutoverSteps = []string{"copy", "pause", "fence", "cutover", "publish", "resume", "finalize"}

var stageStep = map[string]string{
	"begin": "copy", "copy": "copy", "adopt": "copy", "catchup": "copy",
	"pause": "pause", "fence": "fence",
	"cutover": "cutover", "resolve": "cutover", "repause": "cutover",
	"publish": "publish", "open": "publish", "files": "publish", "reload": "publish",
	"resume": "resume", "check": "resume",
	"serving": "finalize", "stop": "finalize", "final": "finalize", "grace": "finalize", "unfence": "finalize", "finish": "finalize",
	"undo": "rollback",
}

func stepIndex(step string) int {
	for i, s := range cutoverSteps {
		if s == step {
			return i
		}
	}
	return len(cutoverSteps)
}

// parseStage reads the stage of a cutover step id, "<db>/<g>/[reverse<n>/]<stage>[/<target>][@v]",
// and whether it is in the reverse direction.
func parseStage(step string) (stage string, reverse bool) {
	step, _, _ = strings.Cut(step, "@")
	parts := strings.Split(step, "/")
	if len(parts) < 3 {
		return "", false
	}
	parts = parts[2:]
	if strings.HasPrefix(parts[0], "reverse") {
		reverse = true
		parts = parts[1:]
	}
	if len(parts) == 0 {
		return "", reverse
	}
	return parts[0], reverse
}

// progressStep maps a stage to its §6.4 step ("rollback" for the undo stages).
func progressStep(stage string, reverse bool) string {
	if reverse && stage != "" {
		return "reverse"
	}
	return stageStep[stage]
}

// StepProgress is one step of the bar.
type StepProgress struct {
	Name     string `json:"name"`
	State    string `json:"state"` // pending, running, done, failed
	StartMS  int64  `json:"start_ms,omitempty"`
	EndMS    int64  `json:"end_ms,omitempty"`
	Commands int    `json:"commands"`
	Failures int    `json:"failures"`
}

// CutoverProgress is what `cutover status` shows.
type CutoverProgress struct {
	DB        string         `json:"db"`
	Running   bool           `json:"running"`
	From      uint64         `json:"from"`
	Steps     []StepProgress `json:"steps"`
	Current   string         `json:"current,omitempty"`
	ElapsedMS int64          `json:"elapsed_ms"`
	StepMS    int64          `json:"step_elapsed_ms"`
	// Copy progress: the last lag seen, the rate it fell at, and when it will be under
	// the threshold at that rate.
	LagBytes     int64    `json:"lag_bytes"`
	LagThreshold int64    `json:"lag_threshold_bytes"`
	RateBytesSec float64  `json:"rate_bytes_per_sec,omitempty"`
	ETAMS        int64    `json:"eta_ms,omitempty"`
	Rollback     bool     `json:"rollback,omitempty"`
	Reverse      bool     `json:"reverse,omitempty"`
	Outcome      string   `json:"outcome,omitempty"`
	Alerts       []string `json:"alerts,omitempty"`
	// Vitess: a Vitess keyspace's cutover (a Reshard); LagMS is its streams' last reported
	// replication lag (LagBytes is the fenced cutover's).
	Vitess bool  `json:"vitess,omitempty"`
	LagMS  int64 `json:"lag_ms,omitempty"`
	// Pause is where the write pause went, step by step and command by command, read from
	// the audit log once the pause has ended (driver.PauseFromAudit).
	Pause *driver.PauseReport `json:"pause,omitempty"`
}

// lagSample is one catch-up poll's answer.
type lagSample struct {
	at  int64
	lag int64
}

// ProgressFromAudit derives the bar from the audit entries of one cutover (every exec and
// result entry of machine "cutover" for the database, starting at its request).
func ProgressFromAudit(db string, entries []driver.AuditEntry, threshold int64, now time.Time) CutoverProgress {
	return progressFrom(db, entries, threshold, now, cutoverSteps, func(step string) (string, bool, bool) {
		stage, reverse := parseStage(step)
		if strings.HasPrefix(stage, "undo") {
			return "", true, false
		}
		if reverse {
			return "", false, true
		}
		return progressStep(stage, false), false, false
	})
}

// progressFrom derives the bar of steps from a machine's audit entries; stepOf names the
// step of a step id, or says it rolls back or reverses.
func progressFrom(db string, entries []driver.AuditEntry, threshold int64, now time.Time, steps []string,
	stepOf func(step string) (name string, rollback, reverse bool)) CutoverProgress {
	p := CutoverProgress{DB: db, LagBytes: -1, LagThreshold: threshold}
	stepIndex := func(name string) int {
		if i := slices.Index(steps, name); i >= 0 {
			return i
		}
		return len(steps)
	}
	for _, name := range steps {
		p.Steps = append(p.Steps, StepProgress{Name: name, State: "pending"})
	}
	var samples []lagSample
	var first int64
	begun := false
	for _, e := range entries {
		if e.Event == driver.AuditAction && strings.HasPrefix(e.What, "cutover ended: ") {
			p.Outcome = strings.Fields(strings.TrimPrefix(e.What, "cutover ended: "))[0]
		}
		if e.Event == driver.AuditReport && strings.HasPrefix(e.What, "Alert ") {
			p.Alerts = append(p.Alerts, e.What)
		}
		if e.Step == "" || (e.Event != driver.AuditExec && e.Event != driver.AuditResult) {
			continue
		}
		name, rollback, reverse := stepOf(e.Step)
		if rollback {
			p.Rollback = true
			continue
		}
		if reverse {
			p.Reverse = true
			continue
		}
		i := stepIndex(name)
		if i >= len(p.Steps) {
			continue
		}
		if !begun {
			first, begun = e.At, true
		}
		st := &p.Steps[i]
		if st.State == "pending" {
			st.StartMS = e.At
			// Reaching a step ends every earlier one.
			for j := range i {
				if p.Steps[j].State != "pending" && p.Steps[j].EndMS == 0 {
					p.Steps[j].EndMS = e.At
					p.Steps[j].State = "done"
				}
			}
		}
		st.State = "running"
		if e.Event == driver.AuditExec {
			st.Commands++
		} else {
			st.EndMS = e.At
			if !e.OK() {
				st.Failures++
			}
			if lag, ok := detailInt(e.Detail, "lag"); ok && lag >= 0 {
				samples = append(samples, lagSample{e.At, lag})
			}
		}
	}
	// Every step is running or done until the outcome says otherwise.
	cur := -1
	for i := range p.Steps {
		if p.Steps[i].State != "pending" {
			cur = i
		}
	}
	for i := range p.Steps {
		switch {
		case p.Steps[i].State == "pending":
		case i < cur || p.Outcome != "":
			p.Steps[i].State = "done"
		default:
			p.Steps[i].State = "running"
			p.Steps[i].EndMS = 0
		}
		if p.Steps[i].Failures > 0 && p.Steps[i].State == "done" && p.Outcome != "" && p.Outcome != "finalized" && p.Outcome != "completed" && i == cur {
			p.Steps[i].State = "failed"
		}
	}
	p.Running = p.Outcome == "" && cur >= 0
	nowMS := now.UnixMilli()
	if cur >= 0 {
		p.Current = p.Steps[cur].Name
		end := nowMS
		if !p.Running {
			end = lastAt(entries)
		}
		p.ElapsedMS = end - first
		p.StepMS = end - p.Steps[cur].StartMS
	}
	if rep, ok := driver.PauseFromAudit(entries); ok {
		p.Pause = &rep
	}
	if len(samples) > 0 {
		last := samples[len(samples)-1]
		p.LagBytes = last.lag
		// The rate over the last few samples (a falling lag), and the time to the threshold.
		k := max(0, len(samples)-6)
		s0 := samples[k]
		if dt := float64(last.at-s0.at) / 1000; dt > 0 && s0.lag > last.lag {
			p.RateBytesSec = float64(s0.lag-last.lag) / dt
			if p.Current == "copy" && last.lag > threshold {
				p.ETAMS = int64(float64(last.lag-threshold) / p.RateBytesSec * 1000)
			}
		}
	}
	return p
}

func lastAt(entries []driver.AuditEntry) int64 {
	if len(entries) == 0 {
		return 0
	}
	return entries[len(entries)-1].At
}

// detailInt reads key=<int> from an audit detail.
func detailInt(detail, key string) (int64, bool) {
	for _, f := range strings.Fields(detail) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
