package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/configmap"
	"loam.dev/router/conformance/etcdtest"
	"loam.dev/router/controller"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/pglaunch"
	"loam.dev/router/refrouter"
)

// The cutover fault test (a) with every part in a process of its own: three reference
// routers (refrouter/cmd/refrouter, PgDog's admin protocol on the wire), two
// `loamrouter serve` controllers on a three-member etcd, the clients in this test writing
// through the routers over the wire.

var refrouterBin string

// refrouterBinary builds the reference router command once per test process.
func refrouterBinary(t *testing.T) string {
	t.Helper()
	binary(t) // makes binDir
	buildMu.Lock()
	defer buildMu.Unlock()
	if refrouterBin == "" {
		p := filepath.Join(binDir, "refrouter")
		out, err := exec.Command("go", "build", "-o", p, "loam.dev/router/refrouter/cmd/refrouter").CombinedOutput()
		require.NoError(t, err, "go build refrouter: %s", out)
		refrouterBin = p
	}
	return refrouterBin
}

// startRefrouter runs one router process on the files in dir and returns it with the
// address it serves (the line it prints).
func startRefrouter(t *testing.T, logDir, id, dir string) (*proc, string) {
	t.Helper()
	p := &proc{t: t, name: id, stderr: filepath.Join(logDir, id+".log"), done: make(chan struct{})}
	logf, err := os.Create(p.stderr)
	require.NoError(t, err)
	p.cmd = exec.Command(refrouterBinary(t), "--id", id, "--dir", dir, "--database", demoDB, "--user", demoRole,
		"--listen", "127.0.0.1:0", "--reshard-user", "postgres")
	p.cmd.Stderr = logf
	out, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	go func() {
		p.err = p.cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err, "refrouter %s printed no address: %s", id, p.log())
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	require.True(t, ok, "refrouter %s: %q", id, line)
	return p, addr
}

// waitLog waits until p's log contains s.
func waitLog(t *testing.T, p *proc, s string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(p.log(), s) {
		require.True(t, time.Now().Before(deadline), "%s never logged %q:\n%s", p.name, s, p.log())
		time.Sleep(10 * time.Millisecond)
	}
}

// cutoverControllerConfig is the loam.toml of one controller of the process test.
func cutoverControllerConfig(id, listen, store, files string, ttl time.Duration, routers map[string][2]string) string {
	var rs strings.Builder
	for i, rid := range slices.Sorted(maps.Keys(routers)) {
		fmt.Fprintf(&rs, "[[databases.routers]]\nid = %q\nadmin = %q\nconfig_dir = %q\nnode_id = \"%d\"\n", rid, routers[rid][0], routers[rid][1], i+1)
	}
	return daemonTOML{ID: id, LeaseTTL: ttl.String(), Listen: listen, Controller: "drain_timeout = \"10s\"\nread_timeout = \"3s\"", Store: store, FilesDir: files,
		DB: pgdogFleetKeys + `schema_admin = "migrator"
schema_admin_password_env = "LOAM_TEST_COPY_PW"
shard_user = "postgres"
shard_sslmode = "disable"
` + indoubtOff + fmt.Sprintf(`[databases.cutover]
designated = %q
publication = "loam_app"
lag_threshold_bytes = 1048576
poll_every = "50ms"
grace = "200ms"
retry_after = "100ms"
%s`, demoDesig, rs.String())}.String()
}

// TestEtcdLeaderKilledMidCutoverProcesses is fault test (a) with two `loamrouter serve`
// processes (active and standby) on a three-member etcd and three reference router
// processes driven over PgDog's admin protocol: a real cutover (two real Postgres servers,
// 2 shards to 3) under a write load through the routers, ref-3's control plane cut so the
// fence must refuse it. When the cutover reaches its copy, etcd's raft leader is
// SIGKILLed; at the next step (the pause: the routers hold their clients' writes) the
// active controller is SIGKILLed too: the standby takes the lease and resumes the
// cutover from its snapshot, which finalizes. No acknowledged write is
// lost, the stale router's writes are refused, and no step was executed twice except a
// command in flight when its controller died (re-issued once by the next tenure, as the
// driver does on restore: it has no result in the first tenure).
func TestEtcdLeaderKilledMidCutoverProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Postgres, etcd and router processes; not in -short")
	}
	if _, err := pglaunch.BinDir(); err != nil {
		if os.Getenv("LOAM_REQUIRE_REAL") == "1" {
			t.Fatalf("LOAM_REQUIRE_REAL=1 but %v", err)
		}
		t.Skip("skipped: needs postgres: " + err.Error())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	cl := etcdtest.Start(t, 3)
	setTestTokens(t)
	t.Setenv("LOAM_TEST_APP_PW", demoPasswd)
	t.Setenv("LOAM_TEST_ADMIN_PW", "admin-test-pw")
	t.Setenv("LOAM_TEST_COPY_PW", "copy-test-pw")
	root := t.TempDir()

	// Two Postgres servers: the source shards and the destination shards.
	settings := pglaunch.WithSettings(map[string]string{"wal_level": "logical", "max_connections": "200", "max_replication_slots": "32",
		"max_wal_senders": "32", "max_logical_replication_workers": "24", "max_worker_processes": "40"})
	w := &demoWorld{}
	var err error
	w.src, err = pglaunch.Start(ctx, settings)
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.src.Close() })
	w.dst, err = pglaunch.Start(ctx, settings)
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.dst.Close() })
	rec, target, err := w.createShards(ctx)
	require.NoError(t, err)

	// The record at generation 1 in etcd, and its files in each router's directory.
	url := etcdStoreURL(cl)
	st := openURL(t, url)
	defer st.Close()
	ref := adapters.DBRef{Namespace: "default", Database: demoDB}
	_, err = st.CAS(ctx, ref, 0, rec)
	require.NoError(t, err)
	files := filepath.Join(root, "files")
	probe := filepath.Join(root, "probe.toml")
	require.NoError(t, os.WriteFile(probe, []byte(cutoverControllerConfig("probe", "127.0.0.1:1", storeTOML(url), files, 5*time.Second, map[string][2]string{demoDesig: {"127.0.0.1:1", root}})), 0o600))
	cfg, err := controller.LoadConfig(probe)
	require.NoError(t, err)
	files1, err := controller.RenderFiles(rec, &cfg.Databases[0])
	require.NoError(t, err)

	routers := map[string][2]string{}
	rprocs := map[string]*proc{}
	var netRouters []refrouter.NetRouter
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("ref-%d", i)
		dir := filepath.Join(root, "routers", id)
		d, err := configmap.NewDir(dir)
		require.NoError(t, err)
		require.NoError(t, d.WriteFiles(ctx, rec.Generation, files1))
		p, addr := startRefrouter(t, root, id, dir)
		routers[id] = [2]string{addr, dir}
		rprocs[id] = p
		netRouters = append(netRouters, refrouter.NetRouter{ID: id, Addr: addr})
	}

	// Two controllers.
	const ttl = 5 * time.Second
	c := &controllers{t: t, dir: root, url: url, files: files, ttl: ttl, procs: map[string]*proc{}, listen: map[string]string{}}
	confs := map[string]string{}
	for _, id := range []string{"a", "b"} {
		c.listen[id] = freePort(t)
		confs[id] = filepath.Join(root, id+".toml")
		require.NoError(t, os.WriteFile(confs[id], []byte(cutoverControllerConfig(id, c.listen[id], storeTOML(url), files, ttl, routers)), 0o600))
		c.procs[id] = startWith(t, binary(t), root, fmt.Sprintf("%s-%d", id, time.Now().UnixNano()), "serve", "--config", confs[id], "--log-level", "debug")
	}
	logs := func() string {
		var b strings.Builder
		for id, p := range c.procs {
			fmt.Fprintf(&b, "--- controller %s\n%s\n", id, p.log())
		}
		for id, p := range rprocs {
			fmt.Fprintf(&b, "--- router %s\n%s\n", id, p.log())
		}
		return b.String()
	}
	_, st1 := c.leader(60 * time.Second)
	require.NoError(t, waitPushed(ctx, st, ref, 1, 3), logs())

	// The load, over the wire through the three routers.
	load := refrouter.StartNetLoad(ctx, refrouter.NetLoadOptions{Routers: netRouters, Database: demoDB, User: demoRole, Password: demoPasswd, Workers: 6, Table: demoTable})
	defer load.Stop()
	waitAcked := func(n int) {
		deadline := time.Now().Add(60 * time.Second)
		for {
			acked, _, _ := refrouter.Tally(load.Writes())
			if acked >= n {
				return
			}
			require.True(t, time.Now().Before(deadline), "only %d writes acknowledged through the routers:\n%s", acked, logs())
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitAcked(100)

	// Generation 2: resharding to 3 shards.
	rec2 := rec.Clone()
	rec2.Generation, rec2.Target = 2, &target
	rec2.State = shardmap.State{Phase: shardmap.Resharding, To: 3}
	data, err := json.Marshal(rec2)
	require.NoError(t, err)
	recPath := filepath.Join(root, "app-g2.json")
	require.NoError(t, os.WriteFile(recPath, data, 0o600))
	runBin(t, root, "--store", url, "map", "apply", demoDB, "--file", recPath)
	require.NoError(t, waitPushed(ctx, st, ref, 2, 3), logs())

	// ref-3 loses its control plane; its clients keep writing.
	rprocs[demoStale].signal(syscall.SIGUSR1)
	waitLog(t, rprocs[demoStale], "control plane cut", 30*time.Second)
	runBin(t, root, "--config", confs["a"], "cutover", "start", demoDB)

	var etcdKilled *etcdtest.Member
	var ctlKilled, next string
	var ctlKilledAt time.Time
	var ctlPhase string
	var took time.Duration
	var phases []string
	finalizeAsked := false
	deadline := time.Now().Add(5 * time.Minute)
	for {
		require.True(t, time.Now().Before(deadline), "the cutover did not end within 5 minutes (phases %v):\n%s", phases, logs())
		p, _, err := controller.CutoverStatus(ctx, st, ref)
		if err != nil {
			time.Sleep(100 * time.Millisecond) // etcd electing a leader: read again
			continue
		}
		if len(phases) == 0 || phases[len(phases)-1] != p.Current {
			phases = append(phases, p.Current)
		}
		if p.Outcome != "" {
			require.Equal(t, "finalized", p.Outcome, "phases %v\n%s", phases, logs())
			break
		}
		if p.Current == "copy" && etcdKilled == nil {
			lctx, lcancel := context.WithTimeout(ctx, 30*time.Second)
			etcdKilled, err = cl.Leader(lctx)
			lcancel()
			require.NoError(t, err)
			etcdKilled.Kill()
			t.Logf("SIGKILLed etcd's leader %s during the copy", etcdKilled.Name)
		}
		// Then the active controller, once the routers are paused (or later): the standby
		// resumes the cutover with the writes held.
		if etcdKilled != nil && ctlKilled == "" && p.Current != "copy" && p.Current != "" {
			leader, _ := c.leader(60 * time.Second)
			c.procs[leader].signal(syscall.SIGKILL)
			ctlKilled, ctlKilledAt, ctlPhase = leader, time.Now(), p.Current
			<-c.procs[leader].done
			var st2 status
			next, st2 = c.leader(60 * time.Second)
			took = time.Since(ctlKilledAt)
			require.NotEqual(t, leader, next)
			require.Greater(t, st2.Epoch, st1.Epoch)
			t.Logf("SIGKILLed the active controller %s at the cutover's %s; %s took over after %v", leader, ctlPhase, next, took)
		}
		if p.Current == "resume" && !finalizeAsked && p.Steps[5].Commands >= 2 {
			finalizeAsked = true
			runBin(t, root, "--config", confs["a"], "cutover", "finalize", demoDB)
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NotNil(t, etcdKilled, "the cutover never showed its copy: nothing was killed (phases %v)", phases)
	require.NotEmpty(t, ctlKilled)

	// ref-3 reachable again: ConfigPush brings it to the final generation.
	rprocs[demoStale].signal(syscall.SIGUSR2)
	final, err := st.Read(ctx, ref)
	require.NoError(t, err)
	require.NoError(t, waitPushed(ctx, st, ref, final.Generation, 3), logs())
	before, _, _ := refrouter.Tally(load.Writes())
	waitAcked(before + 50) // the load goes on on the new shards
	writes := load.Stop()

	acked, fenced, failed := refrouter.Tally(writes)
	cutShort := 0
	for _, wr := range writes {
		if !wr.Acked() && !wr.Fenced() && errors.Is(wr.Err, context.Canceled) {
			failed--
			cutShort++
		} else if !wr.Acked() && !wr.Fenced() {
			t.Logf("write %d through %s failed: %v", wr.Key, wr.Router, wr.Err)
		}
	}
	lost, err := w.checkWrites(ctx, final, writes)
	require.NoError(t, err)
	t.Logf("writes: %d acknowledged, %d refused by the fence, %d failed otherwise, %d cut short by the end of the load, %d lost; phases %v; final generation %d",
		acked, fenced, failed, cutShort, lost, phases, final.Generation)
	require.Zero(t, lost, "acknowledged writes lost")
	require.Zero(t, failed, "writes failed other than by the fence or the end of the load")
	require.Positive(t, fenced, "the stale router %s was never refused by the fence", demoStale)
	staleAfter := 0
	for _, wr := range writes {
		if wr.Router == demoStale && wr.Fenced() {
			staleAfter++
		}
	}
	require.Positive(t, staleAfter, "the refusals must come from the stale router's clients")

	// The audit log: no step executed twice, but for what was in flight when its
	// controller died, re-issued once by the next tenure.
	entries, err := driver.ReadAudit(ctx, st, driver.AuditFilter{})
	require.NoError(t, err)
	type ex struct {
		epoch    uint64
		holder   string
		resulted bool
	}
	execs := map[string][]*ex{}
	for _, e := range entries {
		if e.Step == "" {
			continue
		}
		key := fmt.Sprintf("%s/%s/%s#%d/%s", e.Machine, e.ID, e.Step, e.Attempt, e.Target)
		switch e.Event {
		case driver.AuditExec:
			execs[key] = append(execs[key], &ex{epoch: e.Epoch, holder: e.Holder})
		case driver.AuditResult:
			for _, x := range execs[key] {
				if x.epoch == e.Epoch {
					x.resulted = true
				}
			}
		}
	}
	cut, reissued := 0, 0
	cutBy := map[string]int{}
	for k, xs := range execs {
		if strings.HasPrefix(k, "cutover/") {
			cut++
			cutBy[xs[len(xs)-1].holder]++
		}
		if len(xs) == 1 {
			continue
		}
		require.Len(t, xs, 2, "%s executed %d times", k, len(xs))
		require.Equal(t, ctlKilled, xs[0].holder, "%s executed twice, the first time not by the killed controller", k)
		require.False(t, xs[0].resulted, "%s executed again after its result was recorded", k)
		require.Greater(t, xs[1].epoch, xs[0].epoch, "%s re-issued within one tenure", k)
		reissued++
	}
	require.Positive(t, cut, "no cutover step in the audit log: the check above would pass vacuously")
	require.Positive(t, cutBy[ctlKilled], "the killed controller ran no cutover step: it was not killed mid-cutover (%v)", cutBy)
	require.Positive(t, cutBy[next], "the standby ran no cutover step: it did not resume the cutover (%v)", cutBy)
	t.Logf("audit: %d distinct steps, %d of them cutover steps (last run by: %v); %d re-issued after the controller's SIGKILL (in flight, no result); takeover %v", len(execs), cut, cutBy, reissued, took)
}
