package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/controller"
	"loam.dev/router/driver"
)

// TestTimelineFromSim: every delivered request and reply becomes an arrow between its
// nodes' lanes, every fault a mark, spec events notes; the page is one self-contained SVG.
func TestTimelineFromSim(t *testing.T) {
	lines := []string{
		`{"spec":"sim","action":"deliver","from":"ctl","to":"pgdog-1","what":"Reload","id":1,"t":10}`,
		`{"spec":"sim","action":"fault","what":"pgdog.reload.after_parse","id":1,"t":11}`,
		`{"spec":"sim","action":"reply","from":"pgdog-1","to":"ctl","what":"Reload","id":1,"t":12}`,
		`{"spec":"sim","action":"crash","to":"pgdog-2","t":20}`,
		`{"spec":"sim","action":"timeout","from":"ctl","to":"pgdog-2","what":"Pause","id":2,"t":40}`,
		`{"spec":"Cutover","action":"Pause","instance":"pgdog-1","ok":true,"t":41}`,
	}
	tl, err := timelineFromSim(lines)
	require.NoError(t, err)
	require.Equal(t, []string{"ctl", "pgdog-1", "faults", "pgdog-2", "spec:Cutover"}, tl.Lanes)
	kinds := map[string]int{}
	for _, e := range tl.Events {
		kinds[e.Kind]++
	}
	require.Equal(t, map[string]int{"cmd": 1, "reply": 1, "fault": 3, "note": 1}, kinds)
	var page strings.Builder
	require.NoError(t, renderHTML(&page, "seed 7", tl))
	for _, want := range []string{"<svg", "fault pgdog.reload.after_parse", "timeout Pause → pgdog-2", "Pause instance=pgdog-1 ok=true", `marker-end="url(#a-cmd)"`} {
		require.Contains(t, page.String(), want)
	}
	require.NotContains(t, page.String(), "<script", "self-contained and static")
	_, err = timelineFromSim([]string{"not json"})
	require.ErrorContains(t, err, "history line 1 is not JSON")
}

// TestTimelineFromAudit: a command and its reply are two arrows between the controller and
// the command's target; a failed reply is marked.
func TestTimelineFromAudit(t *testing.T) {
	entries := []driver.AuditEntry{
		{At: 1000, Event: driver.AuditExec, Target: "pgdog-1", What: "Pause step=app/2/pause/pgdog-1 instance=pgdog-1 db=app"},
		{At: 1005, Event: driver.AuditResult, Target: "pgdog-1", What: "Pause step=app/2/pause/pgdog-1 instance=pgdog-1 db=app", Result: "ok"},
		{At: 1010, Event: driver.AuditExec, Target: "s0", What: "Fence step=app/2/fence/s0"},
		{At: 1020, Event: driver.AuditResult, Target: "s0", What: "Fence step=app/2/fence/s0", Result: "unreachable"},
	}
	tl := timelineFromAudit(entries)
	require.Equal(t, []string{"controller", "pgdog-1", "s0"}, tl.Lanes)
	require.Len(t, tl.Events, 4)
	require.Equal(t, "cmd", tl.Events[0].Kind)
	require.Equal(t, "controller", tl.Events[1].To)
	require.Equal(t, "fail", tl.Events[3].Kind)
	require.Contains(t, tl.Events[3].Label, "unreachable")
}

// TestProgressFromAudit: steps are done in order, the current one runs, and the ETA comes
// from the lag's fall over the last polls.
func TestProgressFromAudit(t *testing.T) {
	poll := func(at int64, lag int) driver.AuditEntry {
		return driver.AuditEntry{At: at, Event: driver.AuditResult, Step: "app/4/catchup/1", Detail: "lag=" + itoaTest(lag) + " task=replicating", Result: "ok"}
	}
	entries := []driver.AuditEntry{
		{At: 0, Event: driver.AuditExec, Step: "app/4/begin@12"},
		poll(1000, 9_000_000), poll(2000, 7_000_000), poll(3000, 5_000_000),
	}
	p := controller.ProgressFromAudit("default/app", entries, 1_000_000, timeAt(3500))
	require.Equal(t, "copy", p.Current)
	require.Equal(t, int64(5_000_000), p.LagBytes)
	require.InDelta(t, 2_000_000, p.RateBytesSec, 1)
	require.Equal(t, int64(2000), p.ETAMS, "4 MB to go at 2 MB/s")
	require.Equal(t, int64(3500), p.ElapsedMS)
	entries = append(entries, driver.AuditEntry{At: 4000, Event: driver.AuditExec, Step: "app/4/pause/pgdog-1"},
		driver.AuditEntry{At: 4100, Event: driver.AuditExec, Step: "app/4/undo/unfence/s0"})
	p = controller.ProgressFromAudit("default/app", entries, 1_000_000, timeAt(4200))
	require.Equal(t, "pause", p.Current)
	require.Equal(t, "done", p.Steps[0].State)
	require.Equal(t, "running", p.Steps[1].State)
	require.True(t, p.Rollback)
	require.Zero(t, p.ETAMS, "no copy ETA once the copy is over")
	require.Equal(t, "[█▶·····]", progressBar(p))
}

func itoaTest(n int) string { return strconv.Itoa(n) }

func timeAt(ms int64) time.Time { return time.UnixMilli(ms) }
