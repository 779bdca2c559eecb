package valkey_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	valkeygo "github.com/valkey-io/valkey-go"

	"loam.dev/router/adapters/valkey"
	"loam.dev/router/conformance/redistest"
	"loam.dev/router/kernel/fencing"
	"loam.dev/router/machine"
	"loam.dev/router/machine/fencemigrate"
)

// stagedPod is a relay pod: it runs acquire → validate → renew → release cycles with the
// directory of its current script version, switching version (and reporting it) between
// cycles when the rollout asks, and now and then abandoning a lease to expire by TTL.
type stagedPod struct {
	name string
	want atomic.Int32 // version the deploy system rolled this pod to
	dir  atomic.Pointer[valkey.Directory]
}

// TestRealStagedMigration runs the whole migration live: three pods acquire concurrently on
// a standalone node (cluster mode disabled) while the fencemigrate machine, driven with the
// real clock, moves them O → A → B, runs the backfill, waits a lease TTL, scans for live
// old-key leases, allows C and, after the operator's confirmation, opens the one-way door:
// the new-key state is carried into a 3-primary cluster where the pods keep serving with C.
// T1 and T2 are asserted on the whole recorded history, and T3 at the door.
func TestRealStagedMigration(t *testing.T) {
	const ttl = 400 // ms: short, so the drain wait is short
	sa := redistest.StartStandalone(t)
	cluster := redistest.StartCluster(t, 3)
	cc := cluster.Client(t)
	ctx := context.Background()
	ex, err := valkey.NewExecutor(sa.Client, fencing.Buzz)
	require.NoError(t, err)
	ex.Retry = valkey.Retry{Attempts: 50, Backoff: 10 * time.Millisecond}
	sessions := spreadSessions(8)
	rec := newRecorder()

	dirFor := func(c valkeygo.Client, v fencing.Version) *valkey.Directory {
		d, err := valkey.NewDirectory(c, fencing.Buzz, v)
		require.NoError(t, err)
		return d
	}
	var pods []*stagedPod
	for i := range 3 {
		p := &stagedPod{name: "pod" + strconv.Itoa(i+1)}
		p.dir.Store(dirFor(sa.Client, fencing.O))
		require.NoError(t, ex.Report(ctx, p.name, fencing.O))
		pods = append(pods, p)
	}

	var door sync.RWMutex // pods hold it for reading during a cycle; the door takes it to write
	var onCluster atomic.Bool
	stop, errs := make(chan struct{}), make(chan error, 16)
	var wg sync.WaitGroup
	for pi, p := range pods {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				door.RLock()
				err := func() error {
					d := p.dir.Load()
					if w := fencing.Version(p.want.Load()); w != d.Version() && !onCluster.Load() {
						d = dirFor(sa.Client, w)
						p.dir.Store(d)
						if err := ex.Report(ctx, p.name, w); err != nil {
							return err
						}
					}
					s := sessions[(i*3+pi)%len(sessions)]
					rep, err := rec.call(ctx, d, p.name, s, fencing.Call{Version: d.Version(), Op: fencing.Acquire, Owner: p.name, TTL: ttl})
					if err != nil || !rep.OK {
						return err
					}
					ops := []fencing.Op{fencing.Validate, fencing.Renew, fencing.Validate, fencing.Release}
					if i%9 == 0 {
						ops = ops[:3] // abandon the lease: it expires by TTL
					}
					for _, op := range ops {
						if _, err := rec.call(ctx, d, p.name, s, fencing.Call{Version: d.Version(), Op: op, Lease: rep.Lease, TTL: ttl}); err != nil {
							return err
						}
					}
					return nil
				}()
				door.RUnlock()
				if err != nil {
					errs <- fmt.Errorf("%s: %w", p.name, err)
					return
				}
			}
		})
	}

	// The driver: the machine with the real clock, the executor, and an operator who keeps
	// asking for the next step until it is granted.
	m := fencemigrate.New(fencemigrate.Config{LeaseTTL: ttl})
	var trace machine.Recorder
	t0 := time.Now()
	now := func() int64 { return time.Since(t0).Milliseconds() }
	reported := map[string]fencing.Version{}
	var timer *fencemigrate.SetTimer
	refusedGates := map[fencemigrate.Gate]int{}
	var queue []fencemigrate.Input
	liveAtScan := []int{}
	steps := []fencemigrate.Input{fencemigrate.Advance{To: fencing.A}, fencemigrate.Advance{To: fencing.B},
		fencemigrate.StartBackfill{}, fencemigrate.Advance{To: fencing.C}, fencemigrate.RequestEnable{}}
	next := 0
	lastAsk := time.Time{}
	deadline := time.Now().Add(30 * time.Second)
	for !m.Enabled() {
		require.True(t, time.Now().Before(deadline), "migration did not finish in 30s; refusals: %v", refusedGates)
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
		vs, err := ex.Versions(ctx)
		require.NoError(t, err)
		for pod, v := range vs {
			if reported[pod] != v {
				reported[pod] = v
				queue = append(queue, fencemigrate.PodReported{Pod: pod, Version: v})
			}
		}
		if timer != nil && now() >= timer.At {
			queue = append(queue, fencemigrate.TimerFired{TimerFired: machine.TimerFired{ID: timer.ID}})
			timer = nil
		}
		if next < len(steps) && time.Since(lastAsk) > 50*time.Millisecond {
			queue = append(queue, steps[next])
			lastAsk = time.Now()
		}
		for len(queue) > 0 {
			in := queue[0]
			queue = queue[1:]
			for _, c := range m.On(&machine.Ctx{Now: now(), Trace: &trace}, in) {
				switch c := c.(type) {
				case fencemigrate.AllowVersion:
					next++
					for _, p := range pods { // a rolling deploy, one pod at a time
						p.want.Store(int32(c.Version))
						time.Sleep(20 * time.Millisecond)
					}
				case fencemigrate.RunBackfill:
					next++
					res, err := ex.Backfill(ctx)
					queue = append(queue, fencemigrate.BackfillDone{Step: c.Step, Sessions: res.Raised, Err: err})
				case fencemigrate.SetTimer:
					timer = &c
				case fencemigrate.ScanOldLeases:
					live, err := ex.LiveOldLeases(ctx)
					liveAtScan = append(liveAtScan, len(live))
					queue = append(queue, fencemigrate.OldLeasesScanned{Step: c.Step, Live: len(live), Err: err})
				case fencemigrate.AskConfirmation:
					next++
					queue = append(queue, fencemigrate.Confirm{Token: c.Token})
				case fencemigrate.EnableCluster:
					door.Lock()
					// T3 at the door: no live old lease, every old counter folded in.
					live, err := ex.LiveOldLeases(ctx)
					require.NoError(t, err)
					require.Empty(t, live, "%v: live old leases at the door", fencing.ErrT3)
					checkFolded(t, ctx, sa.Client, sessions)
					carry(t, ctx, sa.Client, cc)
					for _, p := range pods {
						p.dir.Store(dirFor(cc, fencing.C))
					}
					onCluster.Store(true)
					door.Unlock()
					queue = append(queue, fencemigrate.ClusterEnabled{Step: c.Step})
				case fencemigrate.Refused:
					refusedGates[c.Gate]++
				case fencemigrate.Alarm:
					t.Fatalf("alarm: %s %s", c.Pod, c.Detail)
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // C keeps serving on the cluster
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	for g := range refusedGates {
		require.Contains(t, []fencemigrate.Gate{fencemigrate.GateFleetOnA, fencemigrate.GateFleetOnB, fencemigrate.GateFleetOnC,
			fencemigrate.GateBackfilled, fencemigrate.GateDrained}, g, "only waiting gates may refuse in a well-run rollout")
	}
	require.NoError(t, fencing.CheckT1(rec.h), "T1 over the whole history")
	require.NoError(t, fencing.CheckT2(rec.h), "T2 over the whole history")
	byVersion := map[fencing.Version]int{}
	for _, e := range rec.h {
		if e.Call.Op == fencing.Acquire && e.Reply.OK {
			byVersion[e.Call.Version]++
		}
	}
	for _, v := range fencing.Versions {
		require.Positive(t, byVersion[v], "no lease was granted by version %s: the history does not cover the rollout", v)
	}
	var actions []string
	for _, e := range trace.Events {
		if !slices.Contains(actions, e.Action) {
			actions = append(actions, e.Action)
		}
	}
	t.Logf("grants per version %v; refusals while waiting %v; live old leases per scan %v; actions %v; %d calls in %s",
		byVersion, refusedGates, liveAtScan, actions, len(rec.h), time.Since(t0).Round(time.Millisecond))
}

// checkFolded asserts every session's new counter is at least its old one.
func checkFolded(t *testing.T, ctx context.Context, c valkeygo.Client, sessions []fencing.Session) {
	for _, s := range sessions {
		k := fencing.Buzz.Keys(s)
		o, err := c.Do(ctx, c.B().Get().Key(k.OldGeneration).Build()).AsInt64()
		if valkeygo.IsValkeyNil(err) {
			continue
		}
		require.NoError(t, err)
		n, err := c.Do(ctx, c.B().Get().Key(k.NewGeneration).Build()).AsInt64()
		require.NoError(t, err)
		require.GreaterOrEqual(t, n, o, "%v: session %s new counter below old", fencing.ErrT3, s)
	}
}

// carry copies every new-layout key (value and remaining TTL) from the standalone node into
// the cluster: the emulation of the mode change, during which pods are paused. Old keys stay
// behind as unreachable garbage.
func carry(t *testing.T, ctx context.Context, from, to valkeygo.Client) {
	n := 0
	for _, pat := range []string{fencing.Pattern(fencing.Buzz.NewLease), fencing.Pattern(fencing.Buzz.NewGeneration)} {
		var cursor uint64
		for {
			e, err := from.Do(ctx, from.B().Scan().Cursor(cursor).Match(pat).Count(1000).Build()).AsScanEntry()
			require.NoError(t, err)
			for _, k := range e.Elements {
				dump, err := from.Do(ctx, from.B().Dump().Key(k).Build()).ToString()
				if valkeygo.IsValkeyNil(err) {
					continue // expired meanwhile
				}
				require.NoError(t, err)
				pttl, err := from.Do(ctx, from.B().Pttl().Key(k).Build()).AsInt64()
				require.NoError(t, err)
				if pttl == -2 {
					continue
				}
				require.NoError(t, to.Do(ctx, to.B().Restore().Key(k).Ttl(max(pttl, 0)).SerializedValue(dump).Replace().Build()).Error())
				n++
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	require.Positive(t, n, "no new-layout key to carry")
}
