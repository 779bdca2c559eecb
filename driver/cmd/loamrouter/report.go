package main

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"loam.dev/router/driver"
)

// timeline is a run drawn as a sequence diagram: a lane per component, time going down,
// each command and each reply an arrow between lanes, faults and notes marked on a lane.
type timeline struct {
	Lanes  []string
	Events []tlEvent
	// Unit names what At counts: "ms" of wall time (a cutover) or of simulated time (sim).
	Unit string
	// Epoch, when set, is the wall time At counts from (for the axis labels).
	Epoch time.Time
}

// tlEvent is one arrow or mark.
type tlEvent struct {
	At       int64
	From, To string // equal for a mark on one lane
	Label    string
	Detail   string // the tooltip
	Kind     string // cmd, reply, fail, fault, note
}

func (t *timeline) lane(name string) {
	if !slices.Contains(t.Lanes, name) {
		t.Lanes = append(t.Lanes, name)
	}
}

// timelineFromAudit draws a machine's audit entries: the controller sends each command to
// its target and the target answers; failed answers, refusals and alerts are marked.
func timelineFromAudit(entries []driver.AuditEntry) *timeline {
	t := &timeline{Unit: "ms"}
	const ctl = "controller"
	t.lane(ctl)
	if len(entries) > 0 {
		t.Epoch = time.UnixMilli(entries[0].At)
	}
	// Lanes in a stable, readable order: the controller, the store, the files, then every
	// other target in order of first appearance.
	for _, fixed := range []string{"store", "files"} {
		for _, e := range entries {
			if e.Target == fixed {
				t.lane(fixed)
				break
			}
		}
	}
	var others []string
	for _, e := range entries {
		if e.Target != "" && e.Target != ctl && e.Target != "alerts" && !slices.Contains(t.Lanes, e.Target) && !slices.Contains(others, e.Target) {
			others = append(others, e.Target)
		}
	}
	slices.Sort(others)
	for _, o := range others {
		t.lane(o)
	}
	for _, e := range entries {
		if e.Target == "alerts" {
			t.lane("alerts")
			break
		}
	}
	for _, e := range entries {
		at := e.At - t.Epoch.UnixMilli()
		tip := fmt.Sprintf("%s %s %s (epoch %d)", time.UnixMilli(e.At).Format("15:04:05.000"), e.Holder, e.What, e.Epoch)
		target := e.Target
		if target == "" {
			target = ctl
		}
		switch e.Event {
		case driver.AuditExec:
			t.Events = append(t.Events, tlEvent{At: at, From: ctl, To: target, Label: shortWhat(e.What), Detail: tip, Kind: "cmd"})
		case driver.AuditResult:
			kind, label := "reply", "ok"
			if !e.OK() {
				kind, label = "fail", "✗ "+e.Result
			}
			if e.Detail != "" {
				label += " " + e.Detail
			}
			t.Events = append(t.Events, tlEvent{At: at, From: target, To: ctl, Label: label, Detail: tip + " → " + e.Result, Kind: kind})
		case driver.AuditReport:
			kind := "note"
			if strings.HasPrefix(e.What, "Alert") {
				kind = "fault"
			}
			t.Events = append(t.Events, tlEvent{At: at, From: ctl, To: ctl, Label: shortWhat(e.What), Detail: tip, Kind: kind})
		case driver.AuditRefused:
			t.Events = append(t.Events, tlEvent{At: at, From: ctl, To: ctl, Label: "refused: " + shortWhat(e.What), Detail: tip, Kind: "fault"})
		case driver.AuditAction:
			t.Events = append(t.Events, tlEvent{At: at, From: ctl, To: ctl, Label: e.What, Detail: tip, Kind: "note"})
		}
	}
	return t
}

// shortWhat keeps a command's name and step.
func shortWhat(what string) string {
	f := strings.Fields(what)
	out := []string{}
	for i, w := range f {
		if i == 0 || strings.HasPrefix(w, "step=") || strings.HasPrefix(w, "outcome=") || strings.HasPrefix(w, "gen=") {
			out = append(out, w)
		}
	}
	return strings.Join(out, " ")
}

// reportSection is one drawing of a page, with a heading and preformatted text above it.
type reportSection struct {
	Heading string
	Text    string
	TL      *timeline
	Pause   *driver.PauseReport // drawn as the pause's timeline (renderPauseSVG)
}

// writeReportPage writes sections as one self-contained HTML page.
func writeReportPage(path, title string, sections []reportSection) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := renderPage(f, title, sections); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Layout of the drawing.
const (
	laneW   = 170
	leftW   = 90
	topH    = 60
	minStep = 16
	maxStep = 64
)

// renderHTML draws a page of one timeline.
func renderHTML(w io.Writer, title string, t *timeline) error {
	return renderPage(w, title, []reportSection{{TL: t}})
}

// renderPage draws the page: a header, a legend and an inline SVG per section (no scripts,
// no external files; tooltips are SVG <title>s).
func renderPage(w io.Writer, title string, sections []reportSection) error {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	esc := html.EscapeString
	p(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>%s</title>
<style>
body{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:18px;margin:0 0 4px} h2{font-size:15px;margin:24px 0 4px} .legend span{margin-right:14px}
pre{background:#f6f6f6;padding:6px 8px;overflow-x:auto}
svg text{font:11px ui-monospace,monospace}
.lane{stroke:#bbb;stroke-dasharray:4 4} .lanename{font-weight:bold;font-size:12px}
.cmd{stroke:#2a6fdb} .reply{stroke:#2a9d4b} .fail{stroke:#d62828} .note{fill:#555} .fault{fill:#d62828}
.t{fill:#888}
</style></head><body>
<h1>%s</h1>
<div class="legend"><span style="color:#2a6fdb">→ command</span><span style="color:#2a9d4b">← reply</span><span style="color:#d62828">✗ failure / fault</span><span>● note</span> — hover an arrow for its details.</div>
<svg width="0" height="0" style="position:absolute"><defs>`, esc(title), esc(title))
	for _, k := range []struct{ id, color string }{{"cmd", "#2a6fdb"}, {"reply", "#2a9d4b"}, {"fail", "#d62828"}} {
		p(`<marker id="a-%s" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="%s"/></marker>`, k.id, k.color)
	}
	p("</defs></svg>\n")
	for _, s := range sections {
		if s.Heading != "" {
			p("<h2>%s</h2>\n", esc(s.Heading))
		}
		if s.Text != "" {
			p("<pre>%s</pre>\n", esc(s.Text))
		}
		if s.Pause != nil {
			renderPauseSVG(w, *s.Pause)
		}
		if s.TL != nil {
			renderSVG(w, s.TL)
		}
	}
	p("</body></html>\n")
	return nil
}

// renderSVG draws one timeline as a sequence diagram.
func renderSVG(w io.Writer, t *timeline) {
	ev := slices.Clone(t.Events)
	slices.SortStableFunc(ev, func(a, b tlEvent) int { return int(a.At - b.At) })
	// y grows with time, compressed: each event at least minStep below the previous, at most
	// maxStep however long the gap (long waits show as a time label, not empty space).
	ys := make([]int, len(ev))
	y := topH
	for i := range ev {
		if i > 0 {
			gap := ev[i].At - ev[i-1].At
			y += min(maxStep, max(minStep, int(gap/20)+minStep))
		}
		ys[i] = y
	}
	height := y + 40
	width := leftW + laneW*len(t.Lanes) + 260
	x := map[string]int{}
	for i, l := range t.Lanes {
		x[l] = leftW + laneW*i + laneW/2
	}
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	esc := html.EscapeString
	p(`<div class="legend">%d events, %d components</div>
<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">
`, len(ev), len(t.Lanes), width, height, width, height)
	for _, l := range t.Lanes {
		p(`<text class="lanename" x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", x[l], topH-24, esc(l))
		p(`<line class="lane" x1="%d" y1="%d" x2="%d" y2="%d"/>`+"\n", x[l], topH-14, x[l], height-20)
	}
	lastLabel := -100
	for i, e := range ev {
		y := ys[i]
		if y-lastLabel >= 28 || i == 0 {
			p(`<text class="t" x="4" y="%d">%s</text>`+"\n", y+4, esc(t.axis(e.At)))
			lastLabel = y
		}
		tip := "<title>" + esc(e.Detail) + "</title>"
		if e.From == e.To {
			cls := "note"
			mark := "●"
			if e.Kind == "fault" {
				cls, mark = "fault", "✗"
			}
			p(`<g>%s<text class="%s" x="%d" y="%d" text-anchor="middle">%s</text><text class="%s" x="%d" y="%d">%s</text></g>`+"\n",
				tip, cls, x[e.From], y+4, mark, cls, x[e.From]+10, y+4, esc(clip(e.Label, 60)))
			continue
		}
		x1, x2 := x[e.From], x[e.To]
		anchorX := (x1 + x2) / 2
		p(`<g>%s<line class="%s" x1="%d" y1="%d" x2="%d" y2="%d" stroke-width="1.5" marker-end="url(#a-%s)"/><text x="%d" y="%d" text-anchor="middle" class="%s">%s</text></g>`+"\n",
			tip, e.Kind, x1, y, x2, y, e.Kind, anchorX, y-3, "t", esc(clip(e.Label, 34)))
		if e.Kind == "fail" {
			p(`<text class="fault" x="%d" y="%d" text-anchor="middle">✗</text>`+"\n", x1, y+4)
		}
	}
	p("</svg>\n")
}

func (t *timeline) axis(at int64) string {
	if !t.Epoch.IsZero() {
		return t.Epoch.Add(time.Duration(at) * time.Millisecond).Format("15:04:05.000")
	}
	return fmt.Sprintf("%d %s", at, t.Unit)
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// timelineFromSim draws a simulated run from its history lines (detsim's canonical JSON
// lines): each delivered request and each reply is an arrow between the nodes' lanes;
// faults that fired, crashes, restarts, resets, partitions, refused calls and timeouts are
// marked; the machines' spec events are notes on a lane per spec.
func timelineFromSim(lines []string) (*timeline, error) {
	t := &timeline{Unit: "ms (simulated)"}
	type line struct {
		Spec, Action, From, To, What string
		ID                           int64
		T                            int64
	}
	for i, raw := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			return nil, fmt.Errorf("history line %d is not JSON: %w", i+1, err)
		}
		l := line{Spec: str(m["spec"]), Action: str(m["action"]), From: str(m["from"]), To: str(m["to"]), What: str(m["what"])}
		l.ID, _ = num(m["id"])
		l.T, _ = num(m["t"])
		tip := raw
		if l.Spec != "sim" {
			lane := "spec:" + l.Spec
			t.lane(lane)
			t.Events = append(t.Events, tlEvent{At: l.T, From: lane, To: lane, Label: l.Action + fields(m), Detail: tip, Kind: "note"})
			continue
		}
		for _, n := range []string{l.From, l.To} {
			if n != "" {
				t.lane(n)
			}
		}
		switch l.Action {
		case "deliver":
			t.Events = append(t.Events, tlEvent{At: l.T, From: l.From, To: l.To, Label: l.What, Detail: tip, Kind: "cmd"})
		case "reply":
			t.Events = append(t.Events, tlEvent{At: l.T, From: l.From, To: l.To, Label: l.What, Detail: tip, Kind: "reply"})
		case "refused", "timeout":
			t.Events = append(t.Events, tlEvent{At: l.T, From: l.From, To: l.From, Label: l.Action + " " + l.What + " → " + l.To, Detail: tip, Kind: "fault"})
		case "fault":
			t.lane("faults")
			t.Events = append(t.Events, tlEvent{At: l.T, From: "faults", To: "faults", Label: "fault " + l.What, Detail: tip, Kind: "fault"})
		case "crash", "restart", "reset", "cut", "mend", "slow":
			on := l.To
			if on == "" {
				on = l.From
			}
			if on == "" {
				t.lane("faults")
				on = "faults"
			}
			label := l.Action
			if l.From != "" && l.To != "" {
				label += " " + l.From + "→" + l.To
			}
			t.Events = append(t.Events, tlEvent{At: l.T, From: on, To: on, Label: label, Detail: tip, Kind: "fault"})
		default:
			on := l.To
			if on == "" {
				on = l.From
			}
			if on == "" {
				on = "sim"
				t.lane(on)
			}
			label := l.Action
			if l.What != "" {
				label += " " + l.What
			}
			t.Events = append(t.Events, tlEvent{At: l.T, From: on, To: on, Label: label, Detail: tip, Kind: "note"})
		}
	}
	return t, nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func num(v any) (int64, bool) {
	f, ok := v.(float64)
	return int64(f), ok
}

// fields formats a spec event's other fields for its label.
func fields(m map[string]any) string {
	var keys []string
	for k := range m {
		switch k {
		case "spec", "action", "t":
		default:
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%v", k, m[k])
	}
	return b.String()
}
