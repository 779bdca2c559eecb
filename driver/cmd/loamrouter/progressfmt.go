package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"loam.dev/router/controller"
)

// bar draws the step bar: one cell per step.
func progressBar(p controller.CutoverProgress) string {
	var b strings.Builder
	b.WriteByte('[')
	for _, s := range p.Steps {
		switch s.State {
		case "done":
			b.WriteString("█")
		case "running":
			b.WriteString("▶")
		case "failed":
			b.WriteString("✗")
		default:
			b.WriteString("·")
		}
	}
	b.WriteByte(']')
	return b.String()
}

func dur(ms int64) string {
	return (time.Duration(ms) * time.Millisecond).Round(time.Millisecond).String()
}

func bytesText(n int64) string {
	switch {
	case n < 0:
		return "unknown"
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}

// printProgress writes a cutover's status for a terminal.
func printProgress(w io.Writer, p controller.CutoverProgress) {
	done := 0
	for _, s := range p.Steps {
		if s.State == "done" {
			done++
		}
	}
	state := "running"
	switch {
	case p.Outcome != "":
		state = p.Outcome
	case !p.Running:
		state = "not started"
	}
	fmt.Fprintf(w, "%s cutover %s %s %d/%d", p.DB, state, progressBar(p), done, len(p.Steps))
	if p.Current != "" {
		fmt.Fprintf(w, "  at %s for %s, %s in all", p.Current, dur(p.StepMS), dur(p.ElapsedMS))
	}
	fmt.Fprintln(w)
	for i, s := range p.Steps {
		mark := "  "
		switch s.State {
		case "done":
			mark = "✓ "
		case "running":
			mark = "▶ "
		case "failed":
			mark = "✗ "
		}
		line := fmt.Sprintf(" %s%d %-9s", mark, i+1, s.Name)
		if s.State != "pending" {
			end := s.EndMS
			if end == 0 {
				end = s.StartMS + p.StepMS
			}
			line += fmt.Sprintf(" %8s  %d commands", dur(end-s.StartMS), s.Commands)
			if s.Failures > 0 {
				line += fmt.Sprintf(", %d failed", s.Failures)
			}
		}
		if s.Name == "copy" && p.Vitess && s.State != "pending" {
			line += fmt.Sprintf("  lag %s", dur(p.LagMS))
		}
		if s.Name == "copy" && p.LagBytes >= 0 {
			line += fmt.Sprintf("  lag %s (threshold %s)", bytesText(p.LagBytes), bytesText(p.LagThreshold))
			if p.RateBytesSec > 0 {
				line += fmt.Sprintf(", falling %s/s", bytesText(int64(p.RateBytesSec)))
			}
			if p.ETAMS > 0 {
				line += ", ETA " + dur(p.ETAMS)
			}
		}
		fmt.Fprintln(w, line)
	}
	switch {
	case p.Vitess && p.Rollback:
		fmt.Fprintln(w, " cancelling: the reads back on the source shards, the workflow cancelled; the source shards serve")
	case p.Vitess && p.Reverse:
		fmt.Fprintln(w, " reversing: every tablet type's traffic back to the source shards (ReverseTraffic)")
	case p.Rollback:
		fmt.Fprintln(w, " rolling back: the cutover failed before the point of no return")
	}
	if p.Reverse && !p.Vitess {
		fmt.Fprintln(w, " reversing: steps 2–6 the other way, back to the source layout")
	}
	for _, a := range p.Alerts {
		fmt.Fprintln(w, " alert:", a)
	}
	if p.Pause != nil {
		printPause(w, *p.Pause, pauseWidth)
	}
}

// printPlan writes a cutover plan's checks for a terminal.
func printPlan(w io.Writer, r *controller.PlanReport) {
	if v := r.Vitess; v != nil {
		fmt.Fprintf(w, "cutover plan for %s (Vitess Reshard of keyspace %s: %s into %s, workflow %s)\n", r.DB, v.Keyspace,
			strings.Join(v.Source, ","), strings.Join(v.Target, ","), v.Workflow)
	} else {
		fmt.Fprintf(w, "cutover plan for %s (designated %s, %d instances, role %s)\n", r.DB, r.Plan.Designated, len(r.Plan.Instances), r.Plan.Role)
	}
	for _, c := range r.Checks {
		mark := map[string]string{"ok": "✓", "warn": "!", "fail": "✗"}[c.Status]
		fmt.Fprintf(w, " %s %-28s %s\n", mark, c.Name, c.Detail)
	}
	if r.OK {
		fmt.Fprintln(w, "every precondition holds; nothing was changed. Start it with `loamrouter cutover start "+strings.TrimPrefix(r.DB, "default/")+"`.")
	} else {
		fmt.Fprintln(w, "some preconditions fail (✗); nothing was changed.")
	}
}
