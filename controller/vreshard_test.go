package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/driver"
)

// TestVReshardProgress: `cutover status` of a Vitess cutover reads its steps from the
// machine's step ids: a mirror counts for the step it follows, the step reached ends the
// earlier ones, the lag comes from the last Status answer, and a cancel or a reverse is
// told apart from the steps forward.
func TestVReshardProgress(t *testing.T) {
	at := int64(1_000_000)
	entry := func(event, stage, detail string) driver.AuditEntry {
		at += 100
		return driver.AuditEntry{At: at, Event: event, Machine: "vreshard", Step: "ks/split/" + stage, Detail: detail, Result: "ok"}
	}
	var entries []driver.AuditEntry
	for _, st := range []string{"inspect", "mirror>create@1", "create", "mirror>copy@2"} {
		entries = append(entries, entry(driver.AuditExec, st, ""), entry(driver.AuditResult, st, ""))
	}
	entries = append(entries, entry(driver.AuditExec, "copy", ""), entry(driver.AuditResult, "copy", "copying=true lag_ms=4200"))
	p := vreshardProgress("default/app", entries, time.UnixMilli(at+50))
	require.True(t, p.Vitess)
	require.True(t, p.Running)
	require.Equal(t, "copy", p.Current)
	require.Equal(t, int64(4200), p.LagMS)
	require.Equal(t, []string{"done", "done", "running", "pending", "pending", "pending", "pending", "pending", "pending"}, states(p))
	require.Equal(t, []int{2, 2, 1}, []int{p.Steps[0].Commands, p.Steps[1].Commands, p.Steps[2].Commands}, "the mirrors count for the steps they follow")
	require.False(t, p.Rollback || p.Reverse)

	back := append(entries, entry(driver.AuditExec, "cancel", ""), entry(driver.AuditResult, "cancel", ""))
	require.True(t, vreshardProgress("default/app", back, time.UnixMilli(at)).Rollback, "a cancel is shown as one")
	// The hold: vtgate's check answered, nothing sent since; then Complete ends it.
	var fwd []driver.AuditEntry
	for _, st := range []string{"vdiff", "reads", "mirror>writes", "writes", "mirror>verify@3", "verify"} {
		fwd = append(fwd, entry(driver.AuditExec, st, ""), entry(driver.AuditResult, st, ""))
	}
	held := append(append([]driver.AuditEntry{}, entries...), fwd...)
	p = vreshardProgress("default/app", held, time.UnixMilli(at))
	require.Equal(t, "hold", p.Current)
	require.Equal(t, []string{"done", "done", "done", "done", "done", "done", "done", "running", "pending"}, states(p))
	done := append(held, entry(driver.AuditExec, "complete", ""))
	p = vreshardProgress("default/app", done, time.UnixMilli(at))
	require.Equal(t, "complete", p.Current)
	require.Equal(t, "done", p.Steps[7].State, "the hold is over once Complete went out")
	require.Equal(t, p.Steps[6].EndMS, p.Steps[7].StartMS, "the hold began when vtgate's check answered")
	require.Equal(t, p.Steps[8].StartMS, p.Steps[7].EndMS, "and ended when Complete went out")
	rev := append(entries, entry(driver.AuditExec, "reverse", ""))
	p = vreshardProgress("default/app", rev, time.UnixMilli(at))
	require.True(t, p.Reverse, "a reverse is shown as one")
	require.False(t, p.Rollback)
}

func states(p CutoverProgress) []string {
	var out []string
	for _, s := range p.Steps {
		out = append(out, s.State)
	}
	return out
}
