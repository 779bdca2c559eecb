package valkey

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"

	"loam.dev/router/kernel/fencing"
)

// DefaultPodsKey is the hash where pods report the script version they run.
const DefaultPodsKey = "fencing:migration:pods"

// Executor carries out the commands of loam.dev/router/machine/fencemigrate against the
// server: it records and reads each pod's script version, runs the backfill over every
// session, and counts live old-key leases with a scan that is complete on a cluster.
type Executor struct {
	client valkeygo.Client
	naming fencing.Naming
	// PodsKey is the hash of pod → version ("" means DefaultPodsKey).
	PodsKey string
	// Retry is used for TRYAGAIN and for scans whose topology moved; zero means DefaultRetry.
	Retry Retry
}

// NewExecutor returns an executor for the directory laid out by n.
func NewExecutor(c valkeygo.Client, n fencing.Naming) (*Executor, error) {
	if err := n.Validate(); err != nil {
		return nil, err
	}
	return &Executor{client: c, naming: n}, nil
}

func (e *Executor) podsKey() string {
	if e.PodsKey == "" {
		return DefaultPodsKey
	}
	return e.PodsKey
}

func (e *Executor) retry() Retry {
	if e.Retry.Attempts <= 0 {
		return DefaultRetry
	}
	return e.Retry
}

// Report records that pod runs v. Pods call it at start-up; the driver feeds Versions to the
// machine as PodReported inputs.
func (e *Executor) Report(ctx context.Context, pod string, v fencing.Version) error {
	c := e.client
	return wrap("report "+pod, c.Do(ctx, c.B().Hset().Key(e.podsKey()).FieldValue().FieldValue(pod, v.String()).Build()).Error())
}

// Forget removes a pod that has left the fleet.
func (e *Executor) Forget(ctx context.Context, pod string) error {
	c := e.client
	return wrap("forget "+pod, c.Do(ctx, c.B().Hdel().Key(e.podsKey()).Field(pod).Build()).Error())
}

// Versions returns every reported pod's version.
func (e *Executor) Versions(ctx context.Context) (map[string]fencing.Version, error) {
	c := e.client
	m, err := c.Do(ctx, c.B().Hgetall().Key(e.podsKey()).Build()).AsStrMap()
	if err != nil {
		return nil, wrap("read pod versions", err)
	}
	out := make(map[string]fencing.Version, len(m))
	for pod, s := range m {
		v, err := fencing.ParseVersion(s)
		if err != nil {
			return nil, fmt.Errorf("valkey: pod %s in %s: %w", pod, e.podsKey(), err)
		}
		out[pod] = v
	}
	return out, nil
}

// topology is the primaries and their slot ranges, as CLUSTER NODES states them, for
// detecting a change during a scan. A standalone server is one primary owning everything.
type topology struct {
	primaries []string // addresses, sorted
	shape     string   // primaries with their slot fields; equal strings mean nothing moved
	migrating bool     // some slot is MIGRATING or IMPORTING
}

func (e *Executor) topology(ctx context.Context) (topology, error) {
	if e.client.Mode() != valkeygo.ClientModeCluster {
		var addrs []string
		for a := range e.client.Nodes() {
			addrs = append(addrs, a)
		}
		return topology{primaries: addrs, shape: strings.Join(addrs, ",")}, nil
	}
	// Every node is asked: a slot's MIGRATING/IMPORTING state shows only in the CLUSTER NODES
	// answer of the two nodes moving it.
	var t topology
	var shape []string
	nodes := e.client.Nodes()
	for _, addrN := range slices.Sorted(maps.Keys(nodes)) {
		n := nodes[addrN]
		txt, err := n.Do(ctx, n.B().ClusterNodes().Build()).ToString()
		if err != nil {
			return topology{}, wrap("CLUSTER NODES on "+addrN, err)
		}
		var prim []string
		for line := range strings.SplitSeq(strings.TrimSpace(txt), "\n") {
			f := strings.Fields(line)
			if len(f) < 8 || !slices.Contains(strings.Split(f[2], ","), "master") {
				continue
			}
			if strings.Contains(f[2], "fail") && !strings.Contains(f[2], "fail?") {
				return topology{}, fmt.Errorf("valkey: primary %s is marked failed; a complete scan needs every primary", f[1])
			}
			addr, _, _ := strings.Cut(f[1], "@")
			addr, _, _ = strings.Cut(addr, ",")
			prim = append(prim, addr)
			var slots []string
			for _, s := range f[8:] {
				if strings.HasPrefix(s, "[") {
					t.migrating = true
					continue
				}
				slots = append(slots, s)
			}
			shape = append(shape, addrN+">"+addr+"="+strings.Join(slots, " "))
		}
		slices.Sort(prim)
		if t.primaries == nil {
			t.primaries = prim
		} else if !slices.Equal(t.primaries, prim) {
			t.migrating = true // the nodes disagree on who the primaries are: not settled
		}
	}
	slices.Sort(t.primaries)
	slices.Sort(shape)
	t.shape = strings.Join(shape, ";")
	if len(t.primaries) == 0 {
		return topology{}, errors.New("valkey: CLUSTER NODES lists no primary")
	}
	return t, nil
}

// ScanAll calls fn with every key matching pattern on every primary. It is complete: it does
// not rely on the client's routing of a keyless SCAN (which picks one random node and silently
// returns part of a cluster's keyspace); it scans each primary to cursor 0, and repeats the
// whole scan when slots were migrating or the topology changed meanwhile. fn may see a key
// twice when a scan is repeated.
func (e *Executor) ScanAll(ctx context.Context, pattern string, fn func(key string) error) error {
	r := e.retry()
	for attempt := 1; ; attempt++ {
		before, err := e.topology(ctx)
		if err != nil {
			return err
		}
		if !before.migrating {
			var keys []string
			if keys, err = e.scanPrimaries(ctx, before.primaries, pattern); err != nil {
				return err
			}
			after, err := e.topology(ctx)
			if err != nil {
				return err
			}
			if after.shape == before.shape && !after.migrating {
				for _, k := range keys {
					if err := fn(k); err != nil {
						return err
					}
				}
				return nil
			}
		}
		if attempt >= r.Attempts {
			return fmt.Errorf("%w: scan of %q after %d attempts", ErrTopologyChanged, pattern, attempt)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(r.Backoff):
		}
	}
}

func (e *Executor) scanPrimaries(ctx context.Context, primaries []string, pattern string) ([]string, error) {
	nodes := e.client.Nodes()
	var out []string
	for _, addr := range primaries {
		n, ok := nodes[addr]
		if !ok {
			return nil, fmt.Errorf("%w: primary %s is not among the client's nodes %v", ErrTopologyChanged, addr, slices.Sorted(maps.Keys(nodes)))
		}
		var cursor uint64
		for {
			se, err := n.Do(ctx, n.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
			if err != nil {
				return nil, wrap("SCAN "+pattern+" on "+addr, err)
			}
			out = append(out, se.Elements...)
			if cursor = se.Cursor; cursor == 0 {
				break
			}
		}
	}
	return out, nil
}

// LiveOldLeases returns the old-key leases that are live now, across every primary. A key the
// old template matches counts unless it is exactly a new-layout key, so an id that makes the
// pattern ambiguous keeps the gate closed rather than open.
func (e *Executor) LiveOldLeases(ctx context.Context) ([]string, error) {
	seen := map[string]bool{}
	err := e.ScanAll(ctx, fencing.Pattern(e.naming.OldLease), func(k string) error {
		if _, err := fencing.Parse(e.naming.NewLease, k); err == nil {
			return nil
		}
		seen[k] = true
		return nil
	})
	return slices.Sorted(maps.Keys(seen)), err
}

// BackfillResult counts what a backfill did.
type BackfillResult struct {
	Counters int // old counters found
	Raised   int // new counters raised to the old value
}

// ErrAmbiguous is returned (after the rest is done) when old counters could not be mapped to
// one session; their keys are listed and must be folded by hand.
var ErrAmbiguous = errors.New("valkey: old counters with ambiguous session ids were not backfilled")

// Backfill folds every old counter into its new counter (max-merge), session by session. It
// runs with cluster mode disabled, once the whole fleet runs B; running it again changes
// nothing.
func (e *Executor) Backfill(ctx context.Context) (BackfillResult, error) {
	if e.client.Mode() == valkeygo.ClientModeCluster {
		return BackfillResult{}, fmt.Errorf("%w: the backfill reads old and new counters together", ErrClusterMode)
	}
	d, err := NewDirectory(e.client, e.naming, fencing.B)
	if err != nil {
		return BackfillResult{}, err
	}
	d.Retry = e.Retry
	var res BackfillResult
	var ambiguous []string
	seen := map[fencing.Session]bool{}
	err = e.ScanAll(ctx, fencing.Pattern(e.naming.OldGeneration), func(k string) error {
		if _, err := fencing.Parse(e.naming.NewGeneration, k); err == nil {
			return nil // a new counter the old pattern happens to match
		}
		s, err := fencing.Parse(e.naming.OldGeneration, k)
		if err != nil {
			ambiguous = append(ambiguous, k)
			return nil
		}
		if seen[s] {
			return nil
		}
		seen[s] = true
		res.Counters++
		r, err := d.Apply(ctx, s, fencing.Call{Op: fencing.Backfill})
		if err != nil {
			return err
		}
		if r.OK {
			res.Raised++
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	if len(ambiguous) > 0 {
		return res, fmt.Errorf("%w: %q", ErrAmbiguous, ambiguous)
	}
	return res, nil
}
