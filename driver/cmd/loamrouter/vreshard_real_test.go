package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/conformance/vitesstest"
	"loam.dev/router/controller"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/shardmap"
)

var vreshardRuns atomic.Int32

// vitessReshardConfig is the loam.toml of one controller of the Vitess cutover test: the
// shared store server, database app routed by the real Vitess (vtctld, and vtgate for the
// check after the switch).
func vitessReshardConfig(t *testing.T, dir, id, listen, storeURL string, c *vitesstest.Cluster, g *vitesstest.Gate) string {
	t.Helper()
	path := filepath.Join(dir, id+".toml")
	conf := fmt.Sprintf(`[controller]
id = %q
lease_ttl = "2s"
listen = %q
drain_timeout = "10s"
read_timeout = "3s"
token_env = "LOAM_TEST_OPS_TOKEN"

[store]
%s

[[databases]]
name = "app"
files_dir = %q
app_user = "app"
app_password_env = "LOAM_TEST_APP_PW"
[databases.indoubt]
enabled = false
%s`+testAuth, id, listen, storeTOML(storeURL), filepath.Join(dir, "files-"+id), vitessTOML(c.VtctldAddr, g, "LOAM_TEST_VTGATE_PW"))
	require.NoError(t, os.WriteFile(path, []byte(conf), 0o600))
	return path
}

// vreshardRig is where each real Vitess cutover test starts: a keyspace of one shard 0 with
// the writer's schema and rows, the target shards -80 and 80- made before vtgate starts (see
// TestRealReshard in adapters/vtctld), vtgate serving it, and a store server holding the
// record of the keyspace as default/app.
type vreshardRig struct {
	c        *vitesstest.Cluster
	ks       string
	src      *vitesstest.Tablet
	tgt      []*vitesstest.Tablet
	g        *vitesstest.Gate
	db       *sql.DB
	w        *vitesstest.Writer
	dir, url string
	st       testStore
	ref      adapters.DBRef
}

// newVReshardRig makes the rig of keyspace name<n>, preloaded with rows through the writer.
func newVReshardRig(ctx context.Context, t *testing.T, name string, rows int) *vreshardRig {
	r := &vreshardRig{c: vitessCluster.Get(t), ks: name + strconv.Itoa(int(vreshardRuns.Add(1))),
		ref: adapters.DBRef{Namespace: "default", Database: "app"}}
	setTestTokens(t)
	t.Setenv("LOAM_TEST_APP_PW", "app-pw")
	r.c.CreateKeyspace(t, r.ks)
	r.src = r.c.AddShards(t, r.ks, "0")[0]
	r.c.MustVtctldclient(t, "ApplySchema", "--sql", vitesstest.WriterSchema, r.ks)
	r.c.MustVtctldclient(t, "ApplyVSchema", "--vschema", vitesstest.WriterVSchema, r.ks)
	r.tgt = r.c.AddShards(t, r.ks, "-80", "80-")
	r.g = r.c.StartVtgate(t, r.ks)
	t.Setenv("LOAM_TEST_VTGATE_PW", r.g.Password)
	var err error
	r.db, err = sql.Open("mysql", r.g.DSN(r.ks))
	require.NoError(t, err)
	t.Cleanup(func() { r.db.Close() })
	r.w = vitesstest.NewWriter(r.db)
	require.NoError(t, r.w.Preload(ctx, rows))

	r.dir = t.TempDir()
	_, r.url = startStore(t, r.dir)
	r.st = openURL(t, r.url)
	t.Cleanup(func() { r.st.Close() })
	rec, err := oneShardRecord(r.ks, r.src)
	require.NoError(t, err)
	_, err = r.st.CAS(ctx, r.ref, 0, rec)
	require.NoError(t, err)
	return r
}

// TestRealVitessCutoverUnderServe: the Vitess cutover driven by `loamrouter serve`, every
// part a process of its own. Two daemons (leader and standby) share a store server; a real
// Vitess keyspace of one shard 0, with rows, is resharded into -80 and 80- through `cutover
// plan` and `cutover start` while a writer inserts through vtgate all along. When the leader
// executes the switch of the reads it is SIGKILLed; the standby takes the lease, resumes the
// reshard from its snapshot and completes it. Checked: the filed outcome is completed;
// `cutover status` showed the steps; the record mirrors the serving partition (-80, 80-, no
// target); per shard, the row count and a CRC32 checksum equal those of the acknowledged rows
// the record locates there, and no acknowledged write is lost; `locate` names the shard whose
// MySQL holds each row (checked on a sample of the real rows).
func TestRealVitessCutoverUnderServe(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const preload = 2000
	r := newVReshardRig(ctx, t, "serve", preload)
	c, ks, g, tgt, w, dir, url, st, ref := r.c, r.ks, r.g, r.tgt, r.w, r.dir, r.url, r.st, r.ref

	procs, listen, confs := map[string]*proc{}, map[string]string{}, map[string]string{}
	for _, id := range []string{"a", "b"} {
		listen[id] = freePort(t)
		confs[id] = vitessReshardConfig(t, dir, id, listen[id], url, c, g)
	}
	procs["a"] = start(t, dir, "ctl-a", "serve", "--config", confs["a"], "--log-level", "debug")
	require.Eventually(t, func() bool { s, err := getStatus(listen["a"]); return err == nil && s.Leader }, 60*time.Second, 20*time.Millisecond, "a never led")
	procs["b"] = start(t, dir, "ctl-b", "serve", "--config", confs["b"], "--log-level", "debug")
	require.Eventually(t, func() bool { _, err := getStatus(listen["b"]); return err == nil }, 60*time.Second, 20*time.Millisecond, "b never answered")

	// The writer: inserts through vtgate until stopped.
	w.Start(ctx, 1)
	defer w.Stop()

	pc := exec.Command(binary(t), "--config", confs["a"], "cutover", "plan", "app", "--to", "-80,80-", "--workflow", "split")
	pc.Dir = dir
	planOut, err := pc.CombinedOutput()
	plan := string(planOut)
	require.NoError(t, err, plan)
	require.Contains(t, plan, "every precondition holds", plan)
	require.Contains(t, plan, "Vitess Reshard of keyspace "+ks+": 0 into -80,80-", plan)
	began := time.Now()
	out := runBin(t, dir, "--config", confs["a"], "cutover", "start", "app", "--to", "-80,80-", "--workflow", "split")
	require.Contains(t, out, "requested", out)

	// Kill the leader as it executes the switch of the reads.
	readsAt := func() (time.Time, bool) {
		entries, err := driver.ReadAudit(ctx, st, driver.AuditFilter{Machine: "vreshard", ID: ref.String()})
		require.NoError(t, err)
		for _, e := range entries {
			if e.Event == driver.AuditExec && strings.HasSuffix(e.Step, "/split/reads") {
				return time.UnixMilli(e.At), true
			}
		}
		return time.Time{}, false
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		if _, ok := readsAt(); ok {
			break
		}
		require.True(t, time.Now().Before(deadline), "the reads never switched:\n%s", procs["a"].log())
		time.Sleep(20 * time.Millisecond)
	}
	procs["a"].signal(syscall.SIGKILL)
	<-procs["a"].done
	killed := time.Now()
	status := runBin(t, dir, "--config", confs["b"], "cutover", "status", "app")
	require.Contains(t, status, "app cutover", status)

	// The standby resumes it to its end.
	var p controller.CutoverProgress
	finalized := false
	deadline = time.Now().Add(5 * time.Minute)
	progress := func() controller.CutoverProgress {
		var p controller.CutoverProgress
		require.NoError(t, json.Unmarshal([]byte(runBin(t, dir, "--config", confs["b"], "--output", "json", "cutover", "status", "app")), &p))
		return p
	}
	for p.Outcome == "" {
		require.True(t, time.Now().Before(deadline), "the standby did not finish the reshard:\n%s", procs["b"].log())
		time.Sleep(200 * time.Millisecond)
		if p = progress(); !finalized && vitessHolding(p) {
			// The hold: several polls later it still has not completed on its own.
			time.Sleep(3 * time.Second)
			require.True(t, vitessHolding(progress()), "the reshard left the hold without a finalize")
			runBin(t, dir, "--config", confs["b"], "cutover", "finalize", "app")
			finalized = true
		}
	}
	elapsed, resumed := time.Since(began), time.Since(killed)
	w.Stop()
	hist, _, err := controller.GetJSON[controller.CutoverResult](ctx, st, controller.CutoverHistoryKey(ref, 1))
	require.NoError(t, err)
	require.Equal(t, "completed", hist.Outcome, "%s\n%s", hist.Reason, procs["b"].log())
	require.Equal(t, "completed", p.Outcome)
	require.True(t, finalized, "the reshard completed without holding for the finalize")
	require.True(t, p.Vitess)
	for _, s := range p.Steps {
		require.Equal(t, "done", s.State, "step %s", s.Name)
	}
	entries, err := driver.ReadAudit(ctx, st, driver.AuditFilter{Machine: "vreshard", ID: ref.String()})
	require.NoError(t, err)
	var holders []string
	for _, e := range entries {
		if e.Event == driver.AuditExec && (len(holders) == 0 || holders[len(holders)-1] != e.Holder) {
			holders = append(holders, e.Holder)
		}
	}
	require.Equal(t, []string{"a", "b"}, holders, "the leader ran the reshard until it was killed, the standby from then on")

	// The record mirrors the serving partition.
	final, err := st.Read(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, []string{"-80", "80-"}, []string{final.Shards[0].Name, final.Shards[1].Name})
	require.Nil(t, final.Target)
	require.Equal(t, shardmap.Serving, final.State.Phase)
	require.Equal(t, uint16(tgt[0].MySQLPort), final.Shards[0].Backend.Port)
	require.Equal(t, tgt[1].Alias, final.Shards[1].Backend.Tablet)

	// Per shard: the rows the record locates there, by count and checksum, and nothing lost.
	rows, err := w.Check(ctx, tgt, func(id int64) (string, error) {
		loc, err := final.Layout.Locate(strconv.FormatInt(id, 10))
		return loc.Name, err
	})
	require.NoError(t, err)
	lost := 0
	for _, r := range rows {
		require.Equal(t, [2]uint64{r.WantRows, r.WantSum}, [2]uint64{r.Rows, r.Sum}, "shard %s: rows and checksum", r.Shard)
		require.Zero(t, r.Misplaced, "shard %s holds acknowledged rows located elsewhere", r.Shard)
		lost += r.Lost
		t.Logf("shard %s: %d rows, crc32 sum %d", r.Shard, r.Rows, r.Sum)
	}
	require.Zero(t, lost, "acknowledged writes lost")
	// `locate` names the shard whose MySQL holds the row, on a sample of the real rows.
	held, err := vitesstest.Holds(ctx, tgt)
	require.NoError(t, err)
	var sample []int64
	for id := range held {
		if id%97 == 0 && len(sample) < 20 {
			sample = append(sample, id)
		}
	}
	require.NotEmpty(t, sample)
	for _, id := range sample {
		var loc struct {
			Now located `json:"now"`
		}
		require.NoError(t, json.Unmarshal([]byte(runBin(t, dir, "--config", confs["b"], "--output", "json", "locate", "app", strconv.FormatInt(id, 10))), &loc))
		require.Equal(t, held[id], loc.Now.Shard, "id %d: locate says %s, Vitess holds it on %s", id, loc.Now.Shard, held[id])
	}

	// Figures, from the audit log: the copy (Create sent to the first Status saying the copy
	// is done) and the switch of the writes, and the longest gap between acknowledged writes
	// around it.
	copyTime, wrote0, wrote1 := vreshardFigures(entries)
	pause := w.LongestPause(wrote0, wrote1)
	t.Logf("Vitess cutover under serve, 0 -> -80,80-: %d rows acknowledged (%d before), %d writes refused, lost %d; whole run %v; leader killed %v after the start, standby finished %v later; copy %v; SwitchTraffic primary %v, longest write pause through vtgate around it %v",
		w.Acked(), preload, w.Refused(), lost, elapsed.Round(time.Millisecond), killed.Sub(began).Round(time.Millisecond), resumed.Round(time.Millisecond),
		copyTime, wrote1.Sub(wrote0), pause.Round(time.Millisecond))
}

// TestRealVitessCutoverRollback: `cutover rollback` of a Vitess cutover reaches the
// reshard machine as a cancel. The rollback is filed before any controller runs, so the
// machine has it from its first step: it cancels the workflow before anything switched.
// Checked: the filed outcome is cancelled; vtctld lists no workflow; the record serves the
// source shard 0 again, no target; vtgate serves every row from it; `cutover status` says it
// cancelled.
func TestRealVitessCutoverRollback(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const rows = 300
	r := newVReshardRig(ctx, t, "back", rows)
	c, ks, src, g, db, dir, url, st, ref := r.c, r.ks, r.src, r.g, r.db, r.dir, r.url, r.st, r.ref
	listen := freePort(t)
	conf := vitessReshardConfig(t, dir, "a", listen, url, c, g)

	runBin(t, dir, "--config", conf, "cutover", "start", "app", "--to", "-80,80-", "--workflow", "back")
	out := runBin(t, dir, "--config", conf, "cutover", "rollback", "app")
	require.Contains(t, out, "reverse requested for default/app; the Reshard cancels at its next step", out)
	d := start(t, dir, "ctl-a", "serve", "--config", conf, "--log-level", "debug")

	var p controller.CutoverProgress
	deadline := time.Now().Add(3 * time.Minute)
	for p.Outcome == "" {
		require.True(t, time.Now().Before(deadline), "the reshard did not end:\n%s", d.log())
		time.Sleep(200 * time.Millisecond)
		require.NoError(t, json.Unmarshal([]byte(runBin(t, dir, "--config", conf, "--output", "json", "cutover", "status", "app")), &p))
	}
	hist, _, err := controller.GetJSON[controller.CutoverResult](ctx, st, controller.CutoverHistoryKey(ref, 1))
	require.NoError(t, err)
	require.Equal(t, "cancelled", hist.Outcome, "%s\n%s", hist.Reason, d.log())
	require.Contains(t, hist.Reason, "cancelled by an operator")
	require.True(t, p.Rollback, "status shows the cancel")
	require.Contains(t, runBin(t, dir, "--config", conf, "cutover", "status", "app"), "cancelling")

	wf := c.MustVtctldclient(t, "GetWorkflows", ks)
	require.NotContains(t, string(wf), `"back"`, "the workflow is gone: %s", wf)
	final, err := st.Read(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, []string{"0"}, shardNames(final))
	require.Nil(t, final.Target)
	require.Equal(t, shardmap.Serving, final.State.Phase)
	var n int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&n))
	require.Equal(t, rows, n, "vtgate serves every row from the source shard")
	require.Len(t, vitesstest.Ints(t, src, "SELECT id FROM t"), rows)
}

// TestRealVitessCutoverReverseInHold: the hold after the switch is what keeps ReverseTraffic
// possible. A Vitess cutover under `loamrouter serve` reaches the hold (the writes on -80
// and 80-, vtgate's check passed, nothing completed) with a writer inserting through vtgate;
// `cutover rollback` there reverses every tablet type. Checked: the filed outcome is
// reversed; the record's Layout is shard 0 again with the target kept (phase resharding);
// vtctld still lists the workflow; shard 0 holds every acknowledged row, those written on
// the target shards during the hold included (the reverse stream carried them back), each
// exactly once; lost 0.
func TestRealVitessCutoverReverseInHold(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := newVReshardRig(ctx, t, "hold", 300)
	c, ks, src, g, w, dir, url, st, ref := r.c, r.ks, r.src, r.g, r.w, r.dir, r.url, r.st, r.ref
	conf := vitessReshardConfig(t, dir, "a", freePort(t), url, c, g)
	d := start(t, dir, "ctl-a", "serve", "--config", conf, "--log-level", "debug")
	w.Start(ctx, 1)
	defer w.Stop()
	runBin(t, dir, "--config", conf, "cutover", "start", "app", "--to", "-80,80-", "--workflow", "hold")

	progress := func() controller.CutoverProgress {
		var p controller.CutoverProgress
		require.NoError(t, json.Unmarshal([]byte(runBin(t, dir, "--config", conf, "--output", "json", "cutover", "status", "app")), &p))
		return p
	}
	deadline := time.Now().Add(3 * time.Minute)
	for p := progress(); !vitessHolding(p); p = progress() {
		require.True(t, time.Now().Before(deadline), "the reshard never reached the hold:\n%s", d.log())
		require.Empty(t, p.Outcome, "the reshard ended before the hold:\n%s", d.log())
		time.Sleep(200 * time.Millisecond)
	}
	held, err := st.Read(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, []string{"-80", "80-"}, shardNames(held), "in the hold the record names the target shards")
	time.Sleep(2 * time.Second) // writes land on the target shards during the hold
	require.True(t, vitessHolding(progress()), "the hold holds without a finalize")
	runBin(t, dir, "--config", conf, "cutover", "rollback", "app")

	var p controller.CutoverProgress
	for p.Outcome == "" {
		require.True(t, time.Now().Before(deadline), "the reverse did not end:\n%s", d.log())
		time.Sleep(200 * time.Millisecond)
		p = progress()
	}
	time.Sleep(time.Second)
	w.Stop()
	hist, _, err := controller.GetJSON[controller.CutoverResult](ctx, st, controller.CutoverHistoryKey(ref, 1))
	require.NoError(t, err)
	require.Equal(t, "reversed", hist.Outcome, "%s\n%s", hist.Reason, d.log())
	require.True(t, p.Reverse, "status shows the reverse")
	final, err := st.Read(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, []string{"0"}, shardNames(final), "the source serves again")
	require.NotNil(t, final.Target, "the target is kept for a new switch")
	require.Equal(t, shardmap.Resharding, final.State.Phase)
	wf := c.MustVtctldclient(t, "GetWorkflows", ks)
	require.Contains(t, string(wf), `"hold"`, "the workflow stands after ReverseTraffic: %s", wf)

	rows, err := w.Check(ctx, []*vitesstest.Tablet{src}, func(int64) (string, error) { return "0", nil })
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Zero(t, rows[0].Lost, "acknowledged writes lost")
	require.Equal(t, rows[0].WantRows, rows[0].Rows, "shard 0 holds every acknowledged row once")
	require.Equal(t, rows[0].WantSum, rows[0].Sum)
	require.Greater(t, w.Acked(), 300, "writes went on through the hold and the reverse")
	t.Logf("reverse in the hold: %d rows acknowledged, %d writes refused, all on shard 0, lost 0", w.Acked(), w.Refused())
}
