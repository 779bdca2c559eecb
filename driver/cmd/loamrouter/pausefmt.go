package main

import (
	"fmt"
	"html"
	"io"
	"strconv"
	"strings"
	"time"

	"loam.dev/router/controller"
	"loam.dev/router/driver"
)

// pauseWidth is the number of columns the text timeline gives the pause window.
const pauseWidth = 60

// msText prints a duration in milliseconds to 0.1 ms.
func msText(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) + "ms"
}

// pauseScale maps offsets in the window to columns [0, width).
type pauseScale struct {
	window time.Duration
	width  int
}

// cols is the half-open run of columns [lo, hi) that the stretch [a, b) of the window
// covers: at least one column, so a command shorter than a column still shows.
func (s pauseScale) cols(a, b time.Duration) (lo, hi int) {
	if s.window <= 0 {
		return 0, 1
	}
	lo = int(int64(a) * int64(s.width) / int64(s.window))
	hi = int((int64(b)*int64(s.width) + int64(s.window) - 1) / int64(s.window))
	lo = min(max(lo, 0), s.width-1)
	hi = min(max(hi, lo+1), s.width)
	return lo, hi
}

// stepSpan is the stretch of the window a step's bar covers: the step itself (from its
// first command to the next step's) and every command of it, one that outlasts the step
// (an unreachable instance's) included.
func stepSpan(st driver.PauseStep) (a, b time.Duration) {
	a, b = st.Offset, st.Offset+st.Wall
	for _, c := range st.Commands {
		a, b = min(a, c.Offset), max(b, c.Offset+c.Wall)
	}
	return a, b
}

// printPause draws the pause window as a timeline for a terminal: a line per step, its bar
// over the window's width with █ where one of its commands runs and ░ where none does (the
// controller's time: audit writes, saves, waits, scheduling), then a line per command (per
// instance or shard) with its bar, its start and its wall time.
func printPause(w io.Writer, r driver.PauseReport, width int) {
	sc := pauseScale{r.Window, width}
	fmt.Fprintf(w, " pause window %s: commands %s, controller %s (%s)\n", msText(r.Window), msText(r.Commands), msText(r.Controller), r.Costs.String())
	if r.FromAudit {
		fmt.Fprintln(w, "   (from the audit log: the snapshot saves, timers and scheduling it does not hold are in other)")
	}
	fmt.Fprintf(w, "   %-10s 0%s%s\n", "", strings.Repeat(" ", max(0, width-len(msText(r.Window)))), msText(r.Window))
	for _, st := range r.Steps {
		bar := []rune(strings.Repeat(" ", width))
		a, b := stepSpan(st)
		lo, hi := sc.cols(a, b)
		for i := lo; i < hi; i++ {
			bar[i] = '░'
		}
		for _, c := range st.Commands {
			clo, chi := sc.cols(c.Offset, c.Offset+c.Wall)
			for i := clo; i < chi; i++ {
				bar[i] = '█'
			}
		}
		fmt.Fprintf(w, "   %-10s│%s│ @%s %s: commands %s, gaps %s (%s)\n", clip(st.Stage, 10), string(bar), msText(st.Offset), msText(st.Wall),
			msText(st.Busy), msText(st.Wall-st.Busy), st.Costs.String())
		for _, c := range st.Commands {
			cbar := []rune(strings.Repeat(" ", width))
			clo, chi := sc.cols(c.Offset, c.Offset+c.Wall)
			for i := clo; i < chi; i++ {
				cbar[i] = '█'
			}
			line := fmt.Sprintf("     %-8s│%s│ @%s %s", clip(c.Target, 8), string(cbar), msText(c.Offset), msText(c.Wall))
			if c.Audit > 0 {
				line += " (audit " + msText(c.Audit) + ")"
			}
			if c.Result != "ok" {
				line += " failed: " + c.Result
			}
			fmt.Fprintln(w, line)
		}
	}
}

// Layout of the pause's drawing in the HTML report.
const (
	pauseLeftW = 120
	pauseBarW  = 800
	pauseRowH  = 16
)

// renderPauseSVG draws the pause window in the HTML report: a bar of the whole window cut
// into its steps (their walls tile it), then per step a band over the stretch its commands
// cover with a bar per command, each with its wall time on hover.
func renderPauseSVG(w io.Writer, r driver.PauseReport) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	esc := html.EscapeString
	x := func(d time.Duration) float64 {
		if r.Window <= 0 {
			return pauseLeftW
		}
		return pauseLeftW + float64(d)*pauseBarW/float64(r.Window)
	}
	rows := 2
	for _, st := range r.Steps {
		rows += 1 + len(st.Commands)
	}
	height := rows*pauseRowH + 30
	p(`<svg xmlns="http://www.w3.org/2000/svg" class="pause" width="%d" height="%d" viewBox="0 0 %d %d">`+"\n", pauseLeftW+pauseBarW+300, height, pauseLeftW+pauseBarW+300, height)
	y := 4
	p(`<text class="t" x="4" y="%d">window %s</text>`+"\n", y+11, esc(msText(r.Window)))
	for i, st := range r.Steps {
		p(`<rect class="tile" data-stage="%s" x="%.3f" y="%d" width="%.3f" height="%d" fill="%s"><title>%s: %s, commands %s, gaps %s (%s)</title></rect>`+"\n",
			esc(st.Stage), x(st.Offset), y, x(st.Offset+st.Wall)-x(st.Offset), pauseRowH-3, []string{"#9ec5fe", "#a3cfbb", "#fecba1", "#c5b3e6"}[i%4],
			esc(st.Stage), msText(st.Wall), msText(st.Busy), msText(st.Wall-st.Busy), esc(st.Costs.String()))
	}
	y += 2 * pauseRowH
	for _, st := range r.Steps {
		a, b := stepSpan(st)
		p(`<text x="4" y="%d" class="lanename">%s</text>`+"\n", y+11, esc(st.Stage))
		p(`<rect class="step" data-stage="%s" x="%.3f" y="%d" width="%.3f" height="%d" fill="#eee" stroke="#999"><title>%s @%s: wall %s</title></rect>`+"\n",
			esc(st.Stage), x(a), y, x(b)-x(a), pauseRowH-3, esc(st.Stage), msText(st.Offset), msText(st.Wall))
		p(`<text class="t" x="%.3f" y="%d">%s (gaps %s)</text>`+"\n", x(b)+4, y+11, msText(st.Wall), msText(st.Wall-st.Busy))
		y += pauseRowH
		for _, c := range st.Commands {
			fill := "#2a6fdb"
			if c.Result != "ok" {
				fill = "#d62828"
			}
			p(`<text x="16" y="%d" class="t">%s</text>`+"\n", y+11, esc(clip(c.Target, 16)))
			p(`<rect class="cmd" data-stage="%s" x="%.3f" y="%d" width="%.3f" height="%d" fill="%[6]s" stroke="%[6]s" stroke-width="0.5"><title>%s @%s: %s → %s</title></rect>`+"\n",
				esc(st.Stage), x(c.Offset), y+2, x(c.Offset+c.Wall)-x(c.Offset), pauseRowH-7, fill, esc(c.What), msText(c.Offset), msText(c.Wall), esc(c.Result))
			p(`<text class="t" x="%.3f" y="%d">%s</text>`+"\n", x(c.Offset+c.Wall)+4, y+11, msText(c.Wall))
			y += pauseRowH
		}
	}
	p("</svg>\n")
}

// cutoverReport is the cutover's HTML report: the pause window's timeline when the pause
// has ended, then every command and reply of the cutover as a sequence diagram.
func cutoverReport(path, title string, p controller.CutoverProgress, entries []driver.AuditEntry) error {
	var sections []reportSection
	if p.Pause != nil {
		sections = append(sections, reportSection{Heading: "Where the write pause went (first PAUSE to last RESUME)", Pause: p.Pause})
	}
	sections = append(sections, reportSection{Heading: "Every command and reply", TL: timelineFromAudit(entries)})
	return writeReportPage(path, title, sections)
}
