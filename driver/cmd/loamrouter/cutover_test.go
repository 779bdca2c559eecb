package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/boltstore"
	"loam.dev/router/controller"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine/cutover"
)

// reshardingRecord is app at generation 2, resharding from 2 shards to 4.
func reshardingRecord() *shardmap.Record {
	key := shardmap.Key{Column: "id", Type: shardmap.Bigint}
	rec := shardmap.NewPgHash("app", key,
		shardmap.Backend{Host: "127.0.0.1", Port: 5001, Database: "app"},
		shardmap.Backend{Host: "127.0.0.1", Port: 5002, Database: "app"})
	rec.Generation = 2
	rec.State = shardmap.State{Phase: shardmap.Resharding, To: 3}
	target := shardmap.Layout{Scheme: shardmap.PgHash{Key: key, Shards: 4}}
	for i := range 4 {
		target.Shards = append(target.Shards, shardmap.Shard{Name: fmt.Sprintf("n%d", i), Fence: shardmap.FenceOpen,
			Backend: shardmap.Backend{Host: "127.0.0.1", Port: uint16(5101 + i), Database: "app"}})
	}
	rec.Target = &target
	return rec
}

func cutoverConfig(t *testing.T, dir, listen string) string {
	t.Helper()
	return daemonTOML{ID: "ctl-test", LeaseTTL: "1s", Listen: listen, Store: dirStore(filepath.Join(dir, "data")), FilesDir: filepath.Join(dir, "files"),
		DB: pgdogFleetKeys + `schema_admin = "loam_copy"
schema_admin_password_env = "LOAM_TEST_COPY_PW"
` + indoubtOff + `[databases.cutover]
designated = "pgdog-1"
publication = "app_pub"
lag_threshold_bytes = 1000
poll_every = "50ms"
grace = "100ms"
[[databases.routers]]
id = "pgdog-1"
admin = "127.0.0.1:6401"
[[databases.routers]]
id = "pgdog-2"
admin = "127.0.0.1:6402"
[[databases.routers]]
id = "pgdog-3"
admin = "127.0.0.1:6403"
`}.write(t, filepath.Join(dir, "loam.toml"))
}

// setFleetSecrets sets the passwords cutoverConfig names.
func setFleetSecrets(t *testing.T) {
	t.Setenv("LOAM_TEST_APP_PW", "app-pw")
	t.Setenv("LOAM_TEST_ADMIN_PW", "admin-pw")
	t.Setenv("LOAM_TEST_COPY_PW", "copy-pw")
	setTestTokens(t)
}

// cliRun runs one command with the world as the fleet.
func cliRun(t *testing.T, w *world, args ...string) (string, error) {
	t.Helper()
	c := &cli{open: w.opener("pgdog-1", "pgdog-2", "pgdog-3")}
	root := newRootFor(c)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(t.Context())
	return out.String(), err
}

// TestCutoverPlanFence: plan fails a record that puts a source and a destination shard on
// one server (a role's fence holds for the whole server, and the cutover opens the
// destination while the source stays fenced), naming both shards, the server and the fix,
// and a fenced role that is also the login COPY_DATA uses; with separate servers and logins
// both checks pass.
func TestCutoverPlanFence(t *testing.T) {
	setFleetSecrets(t)
	dir := t.TempDir()
	conf := cutoverConfig(t, dir, freePort(t))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "data"), 0o700))
	st, err := boltstore.Open(filepath.Join(dir, "data", "loam.db"), nil)
	require.NoError(t, err)
	rec := reshardingRecord()
	rec.Target.Shards[1].Backend.Port = 5002 // n1 on s1's server
	rec.Target.Shards[1].Backend.Database = "app_n1"
	_, err = st.CAS(t.Context(), adapters.DBRef{Namespace: "default", Database: "app"}, 0, rec)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	w := newWorld()

	out, err := cliRun(t, w, "--config", conf, "cutover", "plan", "app")
	require.ErrorContains(t, err, "preconditions fail")
	require.Contains(t, out, "✗ fence: 127.0.0.1:5002")
	require.Contains(t, out, "source shard s1 and destination shard n1 are both on 127.0.0.1:5002")
	require.Contains(t, out, "put the destination shards on other servers")
	require.Contains(t, out, "the cutover would abort at once: start: source shard s1 and destination shard n1 are on the same server")
	require.NotContains(t, out, "fence: role", "app_user and schema_admin differ")
	require.Zero(t, w.fences, "plan changes nothing")

	out, err = cliRun(t, w, "--config", conf, "cutover", "plan", "app", "--role", "loam_copy")
	require.Error(t, err)
	require.Contains(t, out, "✗ fence: role")
	require.Contains(t, out, "the fenced role loam_copy is also schema_admin")

	// Separate servers: the fence check passes (the instances still lag: other checks fail).
	st, err = boltstore.Open(filepath.Join(dir, "data", "loam.db"), nil)
	require.NoError(t, err)
	cur, err := st.Read(t.Context(), adapters.DBRef{Namespace: "default", Database: "app"})
	require.NoError(t, err)
	next := reshardingRecord()
	next.Generation, next.State.To = 3, 4 // another target is another generation
	_, err = st.CAS(t.Context(), adapters.DBRef{Namespace: "default", Database: "app"}, cur.Version, next)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	out, _ = cliRun(t, w, "--config", conf, "cutover", "plan", "app")
	require.Contains(t, out, "✓ fence: separate servers")
	require.NotContains(t, out, "✗ fence")
}

// TestCutoverThroughTheDaemon: plan checks pass, start files a request, the running
// controller (in this process, holding the embedded store; the commands reach it through
// its listen address) runs the fenced cutover over the fake fleet, status shows the bar and
// writes the picture, finalize ends it, and the history keeps the outcome.
func TestCutoverThroughTheDaemon(t *testing.T) {
	setFleetSecrets(t)
	dir := t.TempDir()
	listen := freePort(t)
	conf := cutoverConfig(t, dir, listen)
	w := newWorld()
	trace := filepath.Join(dir, "trace.jsonl")
	t.Setenv(driver.TraceEnv, trace)

	require.NoError(t, os.MkdirAll(filepath.Join(dir, "data"), 0o700))
	st, err := boltstore.Open(filepath.Join(dir, "data", "loam.db"), nil)
	require.NoError(t, err)
	_, err = st.CAS(t.Context(), adapters.DBRef{Namespace: "default", Database: "app"}, 0, reshardingRecord())
	require.NoError(t, err)
	require.NoError(t, st.Close())

	// Before the controller pushed generation 2 the instances lag: the plan says so.
	out, err := cliRun(t, w, "--config", conf, "cutover", "plan", "app")
	require.ErrorContains(t, err, "preconditions fail")
	require.Contains(t, out, "routes by generation 0, not 2: wait for ConfigPush")
	require.Contains(t, out, "nothing was changed")

	// The daemon.
	serveIn(t, &cli{open: w.opener("pgdog-1", "pgdog-2", "pgdog-3")}, conf, nil)
	require.Eventually(t, func() bool {
		out, err := cliRun(t, w, "--config", conf, "map", "show", "app")
		return err == nil && strings.Contains(out, `"generation": 2`)
	}, 60*time.Second, 20*time.Millisecond, "the CLI reaches the store through the daemon")
	require.Eventually(t, func() bool {
		out, err := cliRun(t, w, "--config", conf, "cutover", "plan", "app")
		return err == nil && strings.Contains(out, "every precondition holds")
	}, 60*time.Second, 20*time.Millisecond, "ConfigPush moves every instance to generation 2, then the plan holds")

	out, err = cliRun(t, w, "--config", conf, "cutover", "start", "app")
	require.NoError(t, err, out)
	require.Contains(t, out, "requested")
	_, err = cliRun(t, w, "--config", conf, "cutover", "start", "app")
	require.Error(t, err, "a second start is refused while one runs")

	// It runs to the point where it waits for the operator: every instance resumed, and the
	// check listed the designated instance's tasks (its reverse stream runs: no reload).
	require.Eventually(t, func() bool {
		out, err := cliRun(t, w, "--config", conf, "cutover", "status", "app", "--output", "json")
		if err != nil {
			return false
		}
		var p controller.CutoverProgress
		require.NoError(t, json.Unmarshal([]byte(out), &p))
		return p.Current == "resume" && p.Steps[5].Commands >= 4 && p.Steps[5].Commands == countResumed(w)+1
	}, 60*time.Second, 50*time.Millisecond)
	w.mu.Lock()
	require.Equal(t, 1, w.cutover, "one CUTOVER on the designated instance")
	require.Equal(t, 6, w.fences, "both layouts fenced at step 3: the 2 source shards and the 4 destination shards")
	require.Len(t, w.drained, 2, "the CUTOVER waited for the drain of the 2 source shards: %v", w.drained)
	src := reshardingRecord()
	for _, l := range []*shardmap.Layout{&src.Layout, src.Target} {
		for _, s := range l.Shards {
			k := s.Backend.Host + ":" + strconv.Itoa(int(s.Backend.Port)) // the fake's key (fakes_test.go)
			require.Equal(t, l == &src.Layout, w.fenced[k], "%s: the source stays fenced until finalize, the destination was opened once generation 3 was published", k)
		}
	}
	require.Equal(t, uint64(3), w.gen["pgdog-2"], "the other instances reloaded generation 3")
	require.Equal(t, uint64(2), w.gen["pgdog-1"], "the designated instance is never reloaded after its CUTOVER (it stays on ConfigPush's 2)")
	w.mu.Unlock()

	out, err = cliRun(t, w, "--config", conf, "cutover", "finalize", "app")
	require.NoError(t, err, out)
	require.Eventually(t, func() bool {
		out, err := cliRun(t, w, "--config", conf, "cutover", "status", "app", "--output", "json")
		var p controller.CutoverProgress
		return err == nil && json.Unmarshal([]byte(out), &p) == nil && p.Outcome == "finalized"
	}, 60*time.Second, 50*time.Millisecond)

	report := filepath.Join(dir, "cutover.html")
	out, err = cliRun(t, w, "--config", conf, "cutover", "status", "app", "--report", report)
	require.NoError(t, err, out)
	require.Contains(t, out, "finalized [███████] 7/7")
	t.Log("\n" + out)
	if d := os.Getenv("LOAM_TEST_KEEP_REPORT"); d != "" {
		data, _ := os.ReadFile(report)
		_ = os.WriteFile(d, data, 0o644)
	}
	page, err := os.ReadFile(report)
	require.NoError(t, err)
	for _, want := range []string{"<svg", "pgdog-1", "127.0.0.1:5001/app", "Cutover step=app/2/cutover/pgdog-1", "controller", `<rect class="tile" data-stage="fence"`} {
		require.Contains(t, string(page), want)
	}
	// The pause's timeline, from the audit log: drawn in the text, and in the JSON the
	// steps tile the window and the fence step holds the six shards' fences.
	require.Regexp(t, `(?m)^ pause window [0-9.]+ms: commands`, out)
	require.Regexp(t, `(?m)^   fence\s+│[█░ ]+│ @`, out)
	out, err = cliRun(t, w, "--config", conf, "cutover", "status", "app", "--output", "json")
	require.NoError(t, err)
	var done controller.CutoverProgress
	require.NoError(t, json.Unmarshal([]byte(out), &done))
	require.NotNil(t, done.Pause, "the pause, read from the audit log")
	var walls time.Duration
	var fence []driver.PauseCommand
	for _, st := range done.Pause.Steps {
		walls += st.Wall
		if st.Stage == "fence" {
			fence = st.Commands
		}
	}
	require.Equal(t, done.Pause.Window, walls, "the steps tile the window")
	require.Len(t, fence, 6, "the fence step: both layouts' shards")

	// Metrics: the series the issue names are served.
	res, err := http.Get("http://" + listen + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, series := range []string{`loam_router_generation{db="default/app",instance="pgdog-1"} 4`, "loam_configpush_duration_seconds_count",
		`loam_cutover_step{db="default/app",step="finalize"} 0`, "loam_cutover_step_duration_seconds_count", `loam_controller_leader{holder="ctl-test"} 1`,
		`loam_steps_total{machine="cutover",result="ok"}`} {
		require.True(t, strings.Contains(string(body), series), "/metrics lacks %s", series)
	}
	// Spec traces: the cutover's actions, one JSON object per line.
	traced, err := os.ReadFile(trace)
	require.NoError(t, err)
	for _, action := range []string{`"spec":"Cutover","action":"Start"`, `"action":"Fence"`, `"action":"Finish"`, `"spec":"ShardMap","action":"Push"`} {
		require.Contains(t, string(traced), action)
	}

	out, err = cliRun(t, w, "--config", conf, "map", "show", "app")
	require.NoError(t, err)
	var rec shardmap.Record
	require.NoError(t, json.Unmarshal([]byte(out), &rec))
	require.Equal(t, shardmap.Serving, rec.State.Phase)
	require.Len(t, rec.Shards, 4, "the record serves the new layout")
	require.Nil(t, rec.Target)
	w.mu.Lock()
	for k, f := range w.fenced {
		require.False(t, f, "%s: finalize clears the fence", k)
	}
	w.mu.Unlock()

	out, err = cliRun(t, w, "--config", conf, "audit", "--machine", "cutover", "--output", "json")
	require.NoError(t, err)
	var entries []driver.AuditEntry
	require.NoError(t, json.Unmarshal([]byte(out), &entries))
	var sawEnd bool
	for _, e := range entries {
		require.Equal(t, "default/app", e.ID)
		if e.Event == driver.AuditExec && e.Machine == "cutover" {
			require.Equal(t, "ctl-test", e.Holder, "every step runs under the controller's lease")
			require.NotZero(t, e.Epoch)
		}
		sawEnd = sawEnd || strings.HasPrefix(e.What, "cutover ended: finalized")
	}
	require.True(t, sawEnd)
}

func countResumed(w *world) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, id := range []string{"pgdog-1", "pgdog-2", "pgdog-3"} {
		if !w.paused[id] {
			n++
		}
	}
	return n
}

// TestCutoverWaitsForThePush: a cutover requested while ConfigPush is still retrying the
// record's generation on an instance starts only once that push has ended, so no retried
// reload can reach the designated instance after its CUTOVER (the simulator found that one).
func TestCutoverWaitsForThePush(t *testing.T) {
	setFleetSecrets(t)
	dir := t.TempDir()
	conf := cutoverConfig(t, dir, freePort(t))
	w := newWorld()
	w.failApply["pgdog-1"] = 2 // the designated instance's first two reloads fail: the push retries
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "data"), 0o700))
	st, err := boltstore.Open(filepath.Join(dir, "data", "loam.db"), nil)
	require.NoError(t, err)
	ref := adapters.DBRef{Namespace: "default", Database: "app"}
	_, err = st.CAS(t.Context(), ref, 0, reshardingRecord())
	require.NoError(t, err)
	// The request is there before the controller even starts.
	require.NoError(t, controller.PutJSON(t.Context(), st, controller.CutoverRequestKey(ref), 0, controller.CutoverRequest{
		Plan: cutoverPlanForTest(), By: "test", At: time.Now().UnixMilli(), From: 2}))
	require.NoError(t, st.Close())

	serveIn(t, &cli{open: w.opener("pgdog-1", "pgdog-2", "pgdog-3")}, conf, nil)
	// The property, judged on what reached the fleet: no reload of generation 2 executes
	// after the cutover's first command (a listing, a copy, a pause or a fence). The audit's
	// order is not it: ConfigPush's snapshot (whose Done the daemon waits on) is saved
	// before its Outcome is audited, so an audit-order check fails on a loaded machine
	// while the fleet saw the right order.
	cutoverOps := map[string]bool{"Tasks": true, "CopyData": true, "SlotLag": true, "Pause": true,
		"AwaitSlotDrain": true, "Cutover": true, "StopTask": true, "FenceWrites": true, "UnfenceWrites": true}
	var calls []string
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		calls = slices.Clone(w.calls)
		return slices.ContainsFunc(calls, func(c string) bool { return strings.HasPrefix(c, "CopyData ") })
	}, time.Minute, 20*time.Millisecond, "the cutover never started its copy")
	first := slices.IndexFunc(calls, func(c string) bool { return cutoverOps[strings.Fields(c)[0]] })
	require.Positive(t, first, "the push's reloads come before any cutover command:\n%s", strings.Join(calls, "\n"))
	for i, c := range calls[first:] {
		f := strings.Fields(c)
		require.False(t, f[0] == "Apply" && f[2] == "2",
			"%q executed after the cutover's first command %q (call %d of):\n%s", c, calls[first], first+i, strings.Join(calls, "\n"))
	}
	require.Contains(t, calls[:first], "Apply pgdog-1 2", "the push reloaded the designated instance before the cutover")
	w.mu.Lock()
	require.Zero(t, w.failApply["pgdog-1"], "both failing reloads happened (the push did retry)")
	w.mu.Unlock()
}

func cutoverPlanForTest() cutover.Plan {
	return cutover.Plan{Designated: "pgdog-1", Instances: []string{"pgdog-1", "pgdog-2", "pgdog-3"}, Role: "app", Publication: "app_pub",
		Options: cutover.Options{LagThreshold: 1000, PollEvery: 50, Grace: 100}}
}

// TestCutoverPlanSharedInstances: a database whose PgDog instances also serve a database
// with a cutover running fails the plan, naming the instance, its admin address and the
// other database (SHOW TASKS lists both databases' tasks together, and a cutover tells its
// own only by id); once that cutover is over, the check passes.
func TestCutoverPlanSharedInstances(t *testing.T) {
	setFleetSecrets(t)
	dir := t.TempDir()
	conf := cutoverConfig(t, dir, freePort(t))
	data, err := os.ReadFile(conf)
	require.NoError(t, err)
	data = append(data, fmt.Sprintf(`
[[databases]]
name = "orders"
files_dir = %q
app_user = "orders"
app_password_env = "LOAM_TEST_APP_PW"
admin_password_env = "LOAM_TEST_ADMIN_PW"
insecure = true
[databases.indoubt]
enabled = false
[[databases.routers]]
id = "orders-1"
admin = "127.0.0.1:6401"
`, filepath.Join(dir, "files-orders"))...)
	require.NoError(t, os.WriteFile(conf, data, 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "data"), 0o700))
	st, err := boltstore.Open(filepath.Join(dir, "data", "loam.db"), nil)
	require.NoError(t, err)
	_, err = st.CAS(t.Context(), adapters.DBRef{Namespace: "default", Database: "app"}, 0, reshardingRecord())
	require.NoError(t, err)
	orders := adapters.DBRef{Namespace: "default", Database: "orders"}
	require.NoError(t, controller.PutJSON(t.Context(), st, controller.CutoverRequestKey(orders), 0, controller.CutoverRequest{By: "test", From: 2}))
	require.NoError(t, st.Close())
	w := newWorld()

	out, err := cliRun(t, w, "--config", conf, "cutover", "plan", "app")
	require.Error(t, err)
	require.Contains(t, out, "✗ instances: pgdog-1")
	require.Contains(t, out, "PgDog instance pgdog-1 (127.0.0.1:6401) also serves default/orders, whose cutover is running")
	require.NotContains(t, out, "pgdog-2 (127.0.0.1:6402) also serves", "pgdog-2 serves app only")

	st, err = boltstore.Open(filepath.Join(dir, "data", "loam.db"), nil)
	require.NoError(t, err)
	b, err := st.GetBlob(t.Context(), controller.CutoverRequestKey(orders))
	require.NoError(t, err)
	require.NoError(t, st.DeleteBlob(t.Context(), controller.CutoverRequestKey(orders), b.Version))
	require.NoError(t, st.Close())
	out, _ = cliRun(t, w, "--config", conf, "cutover", "plan", "app")
	require.Contains(t, out, "✓ instances: not shared")
}
