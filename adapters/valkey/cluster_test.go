package valkey_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	valkeygo "github.com/valkey-io/valkey-go"

	"loam.dev/router/adapters/valkey"
	"loam.dev/router/conformance/redistest"
	"loam.dev/router/kernel/fencing"
)

// Conformance on a real multi-shard cluster: the seed's G2 matrix for the fencing scripts and
// the registry, with both verdict columns — errors that must appear, and silent wrongness that
// must not.

// recorder collects a history from concurrent pods.
type recorder struct {
	mu sync.Mutex
	h  fencing.History
	t0 time.Time
}

func newRecorder() *recorder { return &recorder{t0: time.Now()} }

func (r *recorder) since() int64 { return int64(time.Since(r.t0)) }

func (r *recorder) add(e fencing.Event) {
	r.mu.Lock()
	r.h = append(r.h, e)
	r.mu.Unlock()
}

// call runs one call through d and records it with its invoke and return times.
func (r *recorder) call(ctx context.Context, d *valkey.Directory, pod string, s fencing.Session, c fencing.Call) (fencing.Reply, error) {
	inv := r.since()
	rep, err := d.Apply(ctx, s, c)
	ret := r.since()
	if err == nil {
		r.add(fencing.Event{Pod: pod, Session: s, Call: c, Reply: rep, Invoke: inv, Return: ret})
	}
	return rep, err
}

// pod runs acquire → validate → (renew) → release cycles on random sessions until stop closes.
func (r *recorder) pod(ctx context.Context, t *testing.T, name string, dir func() *valkey.Directory, sessions []fencing.Session, ttl int64, stop <-chan struct{}, errs chan<- error) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		d := dir()
		s := sessions[(i+int(name[len(name)-1]))%len(sessions)]
		rep, err := r.call(ctx, d, name, s, fencing.Call{Version: d.Version(), Op: fencing.Acquire, Owner: name, TTL: ttl})
		if err != nil {
			errs <- fmt.Errorf("%s acquire %s: %w", name, s, err)
			return
		}
		if !rep.OK {
			continue
		}
		for _, op := range []fencing.Op{fencing.Validate, fencing.Renew, fencing.Validate, fencing.Release} {
			if _, err := r.call(ctx, d, name, s, fencing.Call{Version: d.Version(), Op: op, Lease: rep.Lease, TTL: ttl}); err != nil {
				errs <- fmt.Errorf("%s %s %s: %w", name, op, s, err)
				return
			}
		}
	}
}

func spreadSessions(n int) []fencing.Session {
	var out []fencing.Session
	for i := range n {
		out = append(out, fencing.Session{Community: "c" + strconv.Itoa(i%5), ID: "s" + strconv.Itoa(i)})
	}
	return out
}

func grantsPerSession(h fencing.History) map[fencing.Session]int {
	out := map[fencing.Session]int{}
	for _, e := range h {
		if e.Call.Op == fencing.Acquire && e.Reply.OK {
			out[e.Session]++
		}
	}
	return out
}

// TestRealClusterHashTaggedAtomic: C's two-key script runs atomically on every shard under
// concurrent pods: T1 and T2 hold on the history and every session's counter equals its number
// of grants (no lost or doubled increment).
func TestRealClusterHashTaggedAtomic(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	cl := c.Client(t)
	d, err := valkey.NewDirectory(cl, fencing.Buzz, fencing.C)
	require.NoError(t, err)
	sessions := spreadSessions(12)
	owners := map[*redistest.Server]bool{}
	for _, s := range sessions {
		owners[c.Owner(fencing.Slot(fencing.Buzz.Keys(s).NewLease))] = true
	}
	require.Len(t, owners, 3, "the sessions must cover every shard")
	rec := newRecorder()
	ctx := context.Background()
	stop, errs := make(chan struct{}), make(chan error, 8)
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Go(func() {
			rec.pod(ctx, t, "pod"+strconv.Itoa(p), func() *valkey.Directory { return d }, sessions, 60_000, stop, errs)
		})
	}
	time.Sleep(400 * time.Millisecond)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	require.NoError(t, fencing.CheckT1(rec.h))
	require.NoError(t, fencing.CheckT2(rec.h))
	grants := grantsPerSession(rec.h)
	require.NotEmpty(t, grants)
	for _, s := range sessions {
		k := fencing.Buzz.Keys(s)
		got, err := cl.Do(ctx, cl.B().Get().Key(k.NewGeneration).Build()).AsInt64()
		if grants[s] == 0 {
			require.True(t, valkeygo.IsValkeyNil(err))
			continue
		}
		require.NoError(t, err)
		require.Equal(t, int64(grants[s]), got, "session %s: counter vs grants", s)
	}
	t.Logf("%d calls recorded, %d sessions granted", len(rec.h), len(grants))
}

// TestRealClusterCrossSlotRejected is the negative test: the un-tagged pair is rejected with
// CROSSSLOT by the server, the directory refuses old-key versions on a cluster client instead
// of letting valkey-go panic, and a no-cluster script is refused loudly even on one slot.
func TestRealClusterCrossSlotRejected(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	ctx := context.Background()
	k := fencing.Buzz.Keys(fencing.Session{Community: "acme", ID: "sess42"})
	require.NotEqual(t, fencing.Slot(k.OldLease), fencing.Slot(k.OldGeneration))
	body, err := valkey.Script(fencing.O)
	require.NoError(t, err)
	for _, n := range c.Nodes { // on every node, owner or not: the slot check comes first
		err := n.Do(ctx, "EVAL", body, "2", k.OldLease, k.OldGeneration, "pod1", "1000").Error()
		require.Equal(t, "CROSSSLOT", valkey.Prefix(err), "node %s: %v", n.Addr, err)
	}
	for _, v := range []fencing.Version{fencing.O, fencing.A, fencing.B} {
		_, err := valkey.NewDirectory(c.Client(t), fencing.Buzz, v)
		require.ErrorIs(t, err, valkey.ErrClusterMode, "version %s", v)
	}
	ex, err := valkey.NewExecutor(c.Client(t), fencing.Buzz)
	require.NoError(t, err)
	_, err = ex.Backfill(ctx)
	require.ErrorIs(t, err, valkey.ErrClusterMode)
	// An O script whose two keys happen to share a slot is still refused: flags=no-cluster.
	same := []string{"{t}:lease", "{t}:generation"}
	owner := c.Owner(fencing.Slot(same[0]))
	err = owner.Do(ctx, "EVAL", body, "2", same[0], same[1], "pod1", "1000").Error()
	require.ErrorContains(t, err, "no-cluster")
}

func sha(s string) string { h := sha1.Sum([]byte(s)); return hex.EncodeToString(h[:]) }

// TestRealClusterNoScriptPerNode: the script cache is per node. After SCRIPT FLUSH everywhere,
// acquires on sessions of every shard succeed (EVALSHA → NOSCRIPT → EVAL on that node), each
// node then holds the script, and flushing one node again is survived the same way.
func TestRealClusterNoScriptPerNode(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	ctx := context.Background()
	cl := c.Client(t)
	d, err := valkey.NewDirectory(cl, fencing.Buzz, fencing.C)
	require.NoError(t, err)
	body, err := valkey.Script(fencing.C)
	require.NoError(t, err)
	for _, n := range c.Nodes {
		require.NoError(t, n.Do(ctx, "SCRIPT", "FLUSH").Error())
	}
	sessions := spreadSessions(12)
	for _, s := range sessions {
		r, err := d.Acquire(ctx, s, "pod1", time.Minute)
		require.NoError(t, err)
		require.True(t, r.OK)
	}
	for _, n := range c.Nodes {
		ex, err := n.Do(ctx, "SCRIPT", "EXISTS", sha(body)).AsIntSlice()
		require.NoError(t, err)
		require.Equal(t, []int64{1}, ex, "node %s must have loaded the script through the EVAL fallback", n.Addr)
	}
	victim := c.Owner(fencing.Slot(fencing.Buzz.Keys(sessions[0]).NewLease))
	require.NoError(t, victim.Do(ctx, "SCRIPT", "FLUSH").Error())
	r, err := d.Acquire(ctx, sessions[0], "pod2", time.Minute)
	require.NoError(t, err)
	require.False(t, r.OK, "the lease is held")
	require.Equal(t, fencing.Lease{Space: fencing.New, Owner: "pod1", Gen: 1}, r.Holder)
	ex, err := victim.Do(ctx, "SCRIPT", "EXISTS", sha(body)).AsIntSlice()
	require.NoError(t, err)
	require.Equal(t, []int64{1}, ex)
}

// TestRealClusterLiveSlotMigration: acquires keep running while the slots of their sessions
// move between primaries — whole moves (MOVED) and a move held half-done with the lease key on
// the target and the counter still on the source (ASK for single keys, TRYAGAIN for the
// script, retried by the directory). No call fails, a lease held across the moves stays valid,
// T1 and T2 hold on the history, and every counter equals its grants.
func TestRealClusterLiveSlotMigration(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	ctx := context.Background()
	cl := c.Client(t)
	d, err := valkey.NewDirectory(cl, fencing.Buzz, fencing.C)
	require.NoError(t, err)
	sessions := spreadSessions(6)
	held := fencing.Session{Community: "keep", ID: "me"}
	lease, err := d.Acquire(ctx, held, "holder", 10*time.Minute)
	require.NoError(t, err)
	require.True(t, lease.OK)

	rec := newRecorder()
	stop, errs := make(chan struct{}), make(chan error, 8)
	var wg sync.WaitGroup
	// The held session is in every pod's list: their acquires are refused, and they hit its
	// slot while it is split.
	podSessions := append(slices.Clone(sessions), held)
	for p := range 4 {
		wg.Go(func() {
			rec.pod(ctx, t, "pod"+strconv.Itoa(p), func() *valkey.Directory { return d }, podSessions, 60_000, stop, errs)
		})
	}
	moved := 0
	for round := range 3 {
		for _, s := range append([]fencing.Session{held}, sessions[:3]...) {
			slot := fencing.Slot(fencing.Buzz.Keys(s).NewLease)
			to := (c.Primary(c.Owner(slot)) + 1) % 3
			if round == 1 && s == held {
				// Hold the slot split: lease on the target, counter on the source.
				k := fencing.Buzz.Keys(s)
				require.NoError(t, c.MoveSlot(ctx, slot, to, redistest.MoveBegin))
				src := c.Owner(slot)
				require.NoError(t, c.MigrateKeys(ctx, slot, to, []string{k.NewLease}))
				// What the pods are riding out: the script is answered TRYAGAIN (it did not run),
				// a single-key read of the moved key is answered ASK.
				body, _ := valkey.Script(fencing.C)
				err := src.Do(ctx, "EVAL", body, "2", k.NewLease, k.NewGeneration, "probe", "1000").Error()
				require.Equal(t, "TRYAGAIN", valkey.Prefix(err), "%v", err)
				err = src.Do(ctx, "GET", k.NewLease).Error()
				require.Equal(t, "ASK", valkey.Prefix(err), "%v", err)
				time.Sleep(150 * time.Millisecond)
				require.NoError(t, c.MoveSlot(ctx, slot, to, redistest.MoveKeys|redistest.MoveEnd))
			} else {
				require.NoError(t, c.MoveSlot(ctx, slot, to, redistest.MoveAll))
			}
			moved++
			time.Sleep(30 * time.Millisecond)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ok, err := d.Validate(ctx, held, lease.Lease)
	require.NoError(t, err)
	require.True(t, ok, "a lease held across %d slot moves must still pass the fence", moved)
	require.NoError(t, fencing.CheckT1(rec.h))
	require.NoError(t, fencing.CheckT2(rec.h))
	require.Positive(t, d.TryAgains.Load(), "the pods must have ridden out TRYAGAIN while the slot was split")
	grants := grantsPerSession(rec.h)
	total := 0
	for s, n := range grants {
		total += n
		got, err := cl.Do(ctx, cl.B().Get().Key(fencing.Buzz.Keys(s).NewGeneration).Build()).AsInt64()
		require.NoError(t, err)
		require.Equal(t, int64(n), got, "session %s: a generation was lost or repeated", s)
	}
	t.Logf("%d calls across %d slot moves, %d grants, %d TRYAGAIN retries", len(rec.h), moved, total, d.TryAgains.Load())
}

// TestRealClusterRegistryCompleteness: the scored-expiry index discovers exactly the live
// runtimes whose records are spread over every shard — asserted against the known population —
// while the SCAN it replaces, sent through the cluster client, silently sees one node's share.
func TestRealClusterRegistryCompleteness(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	ctx := context.Background()
	cl := c.Client(t)
	reg := valkey.NewRegistry(cl)
	base := time.Now()
	want := map[string]bool{}
	for i := range 60 {
		id := fmt.Sprintf("relay-%02d", i)
		reg.Now = func() time.Time { return base }
		if i%4 == 0 {
			reg.Now = func() time.Time { return base.Add(-time.Minute) } // a runtime that stopped a minute ago
		} else {
			want[id] = true
		}
		require.NoError(t, reg.Heartbeat(ctx, id, "rec-"+id, 15*time.Second))
	}
	reg.Now = func() time.Time { return base }
	peers, err := reg.Discover(ctx)
	require.NoError(t, err)
	got := map[string]bool{}
	for _, p := range peers {
		require.Equal(t, "rec-"+p.ID, p.Record)
		got[p.ID] = true
	}
	require.Equal(t, want, got, "discovery must return exactly the live population")
	n, err := cl.Do(ctx, cl.B().Zcard().Key(reg.Index).Build()).AsInt64()
	require.NoError(t, err)
	require.Equal(t, int64(len(want)), n, "dead scores pruned")

	// A runtime whose record expired but whose score was not yet pruned is skipped, not returned.
	require.NoError(t, cl.Do(ctx, cl.B().Del().Key(reg.Prefix+"relay-01").Build()).Error())
	peers, err = reg.Discover(ctx)
	require.NoError(t, err)
	require.Len(t, peers, len(want)-1)

	// The silent failure the index replaces: a keyless SCAN goes to one node.
	per := map[*redistest.Server]int{}
	for id := range want {
		per[c.Owner(fencing.Slot(reg.Prefix+id))]++
	}
	require.Len(t, per, 3, "records must be spread over every shard")
	var seen []string
	var cursor uint64
	for {
		e, err := cl.Do(ctx, cl.B().Scan().Cursor(cursor).Match(reg.Prefix+"*").Count(1000).Build()).AsScanEntry()
		require.NoError(t, err)
		seen = append(seen, e.Elements...)
		if cursor = e.Cursor; cursor == 0 {
			break
		}
	}
	require.Less(t, len(seen), len(want), "SCAN through the cluster client returned %d of %d records without any error", len(seen), len(want))
	// The executor's per-primary scan is complete.
	ex, err := valkey.NewExecutor(cl, fencing.Buzz)
	require.NoError(t, err)
	all := 0
	require.NoError(t, ex.ScanAll(ctx, reg.Prefix+"*", func(string) error { all++; return nil }))
	require.Equal(t, 60-1, all, "every record still stored (live or not) on every shard")
}

// TestRealClusterLiveOldLeasesComplete: live old-key leases spread over every shard are all
// found by the per-primary scan, and a scan started while a slot is migrating waits for the
// move to finish instead of claiming completeness.
func TestRealClusterLiveOldLeasesComplete(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	ctx := context.Background()
	cl := c.Client(t)
	var want []string
	for _, s := range spreadSessions(30) {
		k := fencing.Buzz.Keys(s)
		want = append(want, k.OldLease)
		require.NoError(t, cl.Do(ctx, cl.B().Set().Key(k.OldLease).Value("p:1").Px(time.Minute).Build()).Error())
		// New-layout keys must not be counted.
		require.NoError(t, cl.Do(ctx, cl.B().Set().Key(k.NewLease).Value("p:2").Px(time.Minute).Build()).Error())
	}
	ex, err := valkey.NewExecutor(cl, fencing.Buzz)
	require.NoError(t, err)
	ex.Retry = valkey.Retry{Attempts: 200, Backoff: 5 * time.Millisecond}
	got, err := ex.LiveOldLeases(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, want, got)

	slot := fencing.Slot(want[0])
	to := (c.Primary(c.Owner(slot)) + 1) % 3
	require.NoError(t, c.MoveSlot(ctx, slot, to, redistest.MoveBegin))
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(100 * time.Millisecond)
		_ = c.MoveSlot(ctx, slot, to, redistest.MoveKeys|redistest.MoveEnd)
	}()
	got, err = ex.LiveOldLeases(ctx)
	<-done
	require.NoError(t, err)
	require.ElementsMatch(t, want, got)
	ex.Retry = valkey.Retry{Attempts: 2, Backoff: time.Millisecond}
	slot2 := fencing.Slot(want[1])
	require.NoError(t, c.MoveSlot(ctx, slot2, (c.Primary(c.Owner(slot2))+1)%3, redistest.MoveBegin))
	_, err = ex.LiveOldLeases(ctx)
	require.ErrorIs(t, err, valkey.ErrTopologyChanged, "a scan must not claim completeness while a slot is migrating")
}
