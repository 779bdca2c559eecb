package main

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/conformance/etcdtest"
	"loam.dev/router/driver"
)

// The fault tests of the controller on a real three-member etcd cluster: two `loamrouter
// serve` processes share it, and ConfigPush is the work they must neither lose nor repeat.
// Waits are bounded generously (a loaded machine is slow, never wrong); the assertions are
// about what happened, not how fast.

const etcdTTL = 2 * time.Second // etcd counts leases in whole seconds

func etcdControllers(t *testing.T, c *etcdtest.Cluster) *controllers {
	setTestTokens(t) // the daemons' API needs its credentials (testAuth)
	t.Setenv("LOAM_TEST_ADMIN_PW", "admin-pw")
	t.Setenv("LOAM_TEST_APP_PW", "app-pw")
	dir := t.TempDir()
	url := etcdStoreURL(c)
	runBin(t, dir, "--store", url, "map", "init", "app", "--example")
	return &controllers{t: t, dir: dir, url: url, files: filepath.Join(dir, "files"), ttl: etcdTTL, procs: map[string]*proc{}, listen: map[string]string{}}
}

// startPair starts controllers a and b, waits for the first push, and returns the leader.
func (c *controllers) startPair() (string, status) {
	c.start("a")
	c.start("b")
	c.waitWritten(1, 60*time.Second)
	return c.leader(30 * time.Second)
}

// requireEachStepOnce: the audit log shows every push step of generations 1..gen executed
// exactly once once its reply was saved (requireNoStepRepeatedAfterItsSave), each under a
// tenure that led when epochs is given.
func requireEachStepOnce(t *testing.T, url string, gen uint64, epochs []uint64) {
	t.Helper()
	requireNoStepRepeatedAfterItsSave(t, url, gen)
	if epochs != nil {
		for key, eps := range pushExecs(t, url) {
			require.Subset(t, epochs, eps, "%s ran under an epoch that never led", key)
		}
	}
}

// TestEtcdSIGSTOPPastTheLease: the active controller is paused (SIGSTOP, every thread
// stopped) for longer than its lease TTL. etcd expires its lease on its own clock, the
// standby takes over and pushes the next generation; the paused one, woken, finds its
// tenure over before it sends anything, executes nothing (no audit entry of its tenure
// after it woke: each would have had to pass etcd's check of the lease) and stands by.
func TestEtcdSIGSTOPPastTheLease(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes; not in -short")
	}
	cl := etcdtest.Start(t, 3)
	c := etcdControllers(t, cl)
	leader, st := c.startPair()
	c.publish(2)
	c.waitWritten(2, 30*time.Second)

	old := c.procs[leader]
	old.stop()
	stopped := time.Now()
	next, st2 := c.leader(60 * time.Second)
	took := time.Since(stopped)
	require.NotEqual(t, leader, next)
	require.Greater(t, st2.Epoch, st.Epoch, "a new tenure has a greater epoch")
	c.publish(3)
	c.waitWritten(3, 30*time.Second)
	if d := etcdTTL + etcdTTL/2 - time.Since(stopped); d > 0 {
		time.Sleep(d) // paused for longer than the TTL in any case
	}
	old.signal(syscall.SIGCONT)
	woke := time.Now()
	c.publish(4)
	c.waitWritten(4, 30*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(old.log(), "lost the lease") {
		require.True(t, time.Now().Before(deadline), "the woken controller never said it lost the lease:\n%s", old.log())
		time.Sleep(10 * time.Millisecond)
	}
	who, _ := c.leader(10 * time.Second)
	require.Equal(t, next, who, "the woken controller must not take over from a live leader")
	require.Equal(t, uint64(4), c.generationWritten())

	requireEachStepOnce(t, c.url, 4, []uint64{st.Epoch, st2.Epoch})
	st0 := openURL(t, c.url)
	defer st0.Close()
	entries, err := driver.ReadAudit(t.Context(), st0, driver.AuditFilter{})
	require.NoError(t, err)
	before := 0
	for _, e := range entries {
		if e.Holder == leader && e.Epoch == st.Epoch {
			require.Less(t, e.At, woke.UnixMilli(), "the deposed controller wrote %q (%s) after it woke", e.What, e.Event)
			before++
		}
	}
	require.Positive(t, before, "the paused controller recorded nothing while it led: the check above would pass vacuously")
	t.Logf("takeover after SIGSTOP with a %v etcd lease: %v", etcdTTL, took)
}

// TestEtcdQuorumLost: two of the three members stop. The active controller cannot renew,
// its tenure ends, and it stops acting; neither controller leads, and each says why on
// /status and in its log. When the members come back, one controller takes the lease and
// pushes the next generation; no step ran twice.
func TestEtcdQuorumLost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes; not in -short")
	}
	cl := etcdtest.Start(t, 3)
	c := etcdControllers(t, cl)
	leader, st := c.startPair()

	cl.Members[0].Stop()
	cl.Members[1].Stop()
	why := map[string]string{}
	deadline := time.Now().Add(60 * time.Second)
	for len(why) < 2 {
		require.True(t, time.Now().Before(deadline), "controllers still acting or silent without quorum: %v", why)
		for id := range c.procs {
			s, err := getStatus(c.listen[id])
			require.NoError(t, err, "%s: /status must answer without quorum; its log:\n%s", id, c.procs[id].log())
			if !s.Leader && s.Why != "" {
				why[id] = s.Why
			} else {
				delete(why, id)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.Contains(t, c.procs[leader].log(), "lost the lease")
	for id, w := range why {
		require.Regexp(t, "quorum|unreachable|no answer", w, "%s: /status says why it does not lead", id)
	}
	gen := c.generationWritten()

	require.NoError(t, cl.Members[0].Restart())
	require.NoError(t, cl.Members[1].Restart())
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	require.NoError(t, cl.WaitHealthy(ctx))
	_, st2 := c.leader(60 * time.Second)
	require.Greater(t, st2.Epoch, st.Epoch)
	c.publish(gen + 1)
	c.waitWritten(gen+1, 30*time.Second)
	requireEachStepOnce(t, c.url, gen+1, nil)
}

// TestTakeoverFiguresEtcdVsStoreServe measures, in one run, the takeover after SIGKILL of
// the active controller with the same lease TTL on a three-member etcd (etcd's lease, the
// standby woken by the watch on the lease blob's deletion) and on bbolt behind
// store-serve (the blob lease: the standby's poll and its own TTL count). It logs the
// figures and their ratio; it asserts only that every takeover happened and every push
// step ran once.
func TestTakeoverFiguresEtcdVsStoreServe(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes; not in -short")
	}
	const rounds = 3
	measure := func(c *controllers) []time.Duration {
		c.startPair()
		gen := uint64(1)
		var took []time.Duration
		for range rounds {
			leader, st := c.leader(30 * time.Second)
			old := c.procs[leader]
			old.signal(syscall.SIGKILL)
			killed := time.Now()
			next, st2 := c.leader(60 * time.Second)
			took = append(took, time.Since(killed))
			require.NotEqual(t, leader, next)
			require.Greater(t, st2.Epoch, st.Epoch)
			gen++
			c.publish(gen)
			c.waitWritten(gen, 30*time.Second)
			<-old.done
			c.start(leader)
		}
		requireEachStepOnce(t, c.url, gen, nil)
		slices.Sort(took)
		return took
	}
	etcd := measure(etcdControllers(t, etcdtest.Start(t, 3)))

	t.Setenv("LOAM_TEST_ADMIN_PW", "admin-pw")
	t.Setenv("LOAM_TEST_APP_PW", "app-pw")
	dir := t.TempDir()
	_, url := startStore(t, dir)
	runBin(t, dir, "--store", url, "map", "init", "app", "--example")
	bolt := measure(&controllers{t: t, dir: dir, url: url, files: filepath.Join(dir, "files"), ttl: etcdTTL, procs: map[string]*proc{}, listen: map[string]string{}})

	me, mb := etcd[len(etcd)/2], bolt[len(bolt)/2]
	t.Logf("takeover after SIGKILL, lease_ttl %v, median of %d: etcd (3 members) %v, bbolt behind store-serve %v; etcd/store-serve = %.2f (all: etcd %v, store-serve %v)",
		etcdTTL, rounds, me.Round(time.Millisecond), mb.Round(time.Millisecond), me.Seconds()/mb.Seconds(), etcd, bolt)
}

// Fault test (a), etcd's leader SIGKILLed mid-cutover, is TestEtcdLeaderKilledMidCutoverProcesses
// (etcd_cutover_test.go): two controller processes and three router processes.
