package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/conformance/pgtest"
	"loam.dev/router/controller"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine/indoubt"
)

// TestRealInDoubtTakeover runs the in-doubt monitor of two controller processes against
// two real Postgres shards. A PgDog transaction whose coordinator is gone is prepared on
// shard s0; the leader alerts (to a file), is SIGKILLed once the delivery is saved, and the
// standby takes over: it resumes the monitor's rounds where they were (no round number
// reused) and does not deliver the same alert again. `indoubt list` shows the alert, from
// the monitor's state and from a scan.
func TestRealInDoubtTakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes; not in -short")
	}
	srv := pgtest.Start(t, pgtest.WithSetting("max_prepared_transactions", "10"))
	srv.CreateDatabase(t, "app0")
	srv.CreateDatabase(t, "app1")
	srv.Exec(t, "app0", "CREATE TABLE t (id int); BEGIN; INSERT INTO t VALUES (1); PREPARE TRANSACTION '__pgdog_2pc_7_12345_0'")
	t.Cleanup(func() { srv.Exec(t, "app0", "ROLLBACK PREPARED '__pgdog_2pc_7_12345_0'") })

	t.Setenv("LOAM_TEST_ADMIN_PW", "admin-pw")
	t.Setenv("LOAM_TEST_APP_PW", "app-pw")
	dir := t.TempDir()
	_, url := startStore(t, dir)
	rec := shardmap.NewPgHash("app", shardmap.Key{Column: "id", Type: shardmap.Bigint},
		shardmap.Backend{Host: "127.0.0.1", Port: uint16(srv.Port), Database: "app0"},
		shardmap.Backend{Host: "127.0.0.1", Port: uint16(srv.Port), Database: "app1"})
	data, err := json.Marshal(rec)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "app.json"), data, 0o600))
	runBin(t, dir, "--store", url, "map", "init", "app", "--file", filepath.Join(dir, "app.json"))

	alerts := filepath.Join(dir, "alerts.jsonl")
	listen := map[string]string{"a": freePort(t), "b": freePort(t)}
	conf := func(id string) string {
		return daemonTOML{ID: id, LeaseTTL: "1s", Listen: listen[id],
			Store:  storeTOML(url),
			Tables: fmt.Sprintf("[alerts]\nkind = \"file\"\npath = %q\n", alerts),
			DB: pgdogFleetKeys + `shard_user = "postgres"
shard_sslmode = "disable"
[databases.indoubt]
period = "150ms"
threshold = "1ms"
`}.write(t, filepath.Join(dir, id+".toml"))
	}
	procs := map[string]*proc{"a": start(t, dir, "a", "serve", "--config", conf("a"))}
	waitAlert := func() controller.AlertLine {
		var got []controller.AlertLine
		require.Eventually(t, func() bool {
			got, _ = controller.ReadAlertLines(alerts)
			return len(got) > 0
		}, 20*time.Second, 20*time.Millisecond, "no alert delivered:\n%s", procs["a"].log())
		return got[0]
	}
	first := waitAlert()
	require.Equal(t, "raise", first.Op)
	require.Equal(t, indoubt.ReasonGone, first.Alert.Reason)
	require.Equal(t, "7", first.Alert.Instance)
	procs["b"] = start(t, dir, "b", "serve", "--config", conf("b"))

	st := opsClient(t, url)
	// Wait until the delivery is saved (the alert no longer in the outbox) and a later round
	// has run, then kill the leader.
	var before indoubt.Snapshot
	require.Eventually(t, func() bool {
		before, _, err = controller.GetJSON[indoubt.Snapshot](t.Context(), st, driver.SnapshotKey("indoubt", "default/app"))
		return err == nil && len(before.Outbox) == 0 && len(before.Alerts) == 1 && before.Round >= 3
	}, 10*time.Second, 10*time.Millisecond)
	procs["a"].signal(syscall.SIGKILL)
	<-procs["a"].done
	killedAt := before.Round

	// b resumes: later rounds, the same alert still raised, not delivered again.
	var after indoubt.Snapshot
	require.Eventually(t, func() bool {
		after, _, err = controller.GetJSON[indoubt.Snapshot](t.Context(), st, driver.SnapshotKey("indoubt", "default/app"))
		return err == nil && after.Round >= killedAt+5
	}, 15*time.Second, 20*time.Millisecond, "the standby did not carry the rounds on:\n%s", procs["b"].log())
	require.Len(t, after.Alerts, 1)
	lines, err := controller.ReadAlertLines(alerts)
	require.NoError(t, err)
	require.Len(t, lines, 1, "the alert was delivered again after the takeover: %+v", lines)

	execs := map[string][]uint64{}
	entries, err := driver.ReadAudit(t.Context(), st, driver.AuditFilter{Machine: "indoubt"})
	require.NoError(t, err)
	epochs := map[uint64]bool{}
	for _, e := range entries {
		if e.Event == driver.AuditExec {
			execs[e.Step] = append(execs[e.Step], e.Epoch)
			epochs[e.Epoch] = true
		}
	}
	require.Len(t, epochs, 2, "both tenures ran rounds")
	for step, eps := range execs {
		// A round's commands in flight at the kill are re-sent by the next tenure with the
		// same step id; nothing else is executed twice.
		if len(eps) > 1 {
			require.Len(t, eps, 2, step)
			require.NotEqual(t, eps[0], eps[1], "%s executed twice by one tenure", step)
			require.True(t, strings.HasPrefix(step, fmt.Sprintf("r%d/", killedAt)) || strings.HasPrefix(step, fmt.Sprintf("r%d/", killedAt+1)),
				"%s re-executed after the takeover but was not in flight at the kill (round %d)", step, killedAt)
		}
	}

	out := runBin(t, dir, "--store", url, "--config", conf("b"), "indoubt", "list", "app")
	require.Contains(t, out, "__pgdog_2pc_7_12345_0")
	require.Contains(t, out, "ALERT")
	out = runBin(t, dir, "--store", url, "--config", conf("b"), "indoubt", "list", "app", "--scan", "--output", "json")
	var rep indoubtReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Len(t, rep.Prepared, 1)
	require.Equal(t, "7", rep.Prepared[0].Coordinator)
	require.Equal(t, "s0", rep.Prepared[0].Shard)
}
