package valkey

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"

	"loam.dev/router/kernel/fencing"
)

// Retry bounds the retries of a call answered TRYAGAIN (its slot's keys are split by a live
// migration; the script did not run, so retrying is safe for every script).
type Retry struct {
	Attempts int
	Backoff  time.Duration
}

// DefaultRetry rides out a slot migration of a few hundred milliseconds.
var DefaultRetry = Retry{Attempts: 100, Backoff: 10 * time.Millisecond}

// Directory runs one script version's calls for the sessions of a directory.
type Directory struct {
	client  valkeygo.Client
	naming  fencing.Naming
	version fencing.Version
	cluster bool
	// Retry is used for TRYAGAIN; zero Attempts means DefaultRetry.
	Retry Retry
	// TryAgains counts TRYAGAIN replies retried, for metrics (a slot was split by a migration).
	TryAgains atomic.Int64
}

// NewDirectory returns the directory of a pod running version v. A cluster client is refused
// for versions before C (ErrClusterMode): their scripts touch the old keys, whose lease and
// generation sit in different slots.
func NewDirectory(c valkeygo.Client, n fencing.Naming, v fencing.Version) (*Directory, error) {
	if err := n.Validate(); err != nil {
		return nil, err
	}
	if v > fencing.C {
		return nil, fmt.Errorf("valkey: unknown script version %s", v)
	}
	cluster := c.Mode() == valkeygo.ClientModeCluster
	if cluster && v != fencing.C {
		return nil, fmt.Errorf("%w: version %s reads the old keys (run it with cluster mode disabled, or deploy C first)", ErrClusterMode, v)
	}
	return &Directory{client: c, naming: n, version: v, cluster: cluster}, nil
}

// Version is the script version this directory runs.
func (d *Directory) Version() fencing.Version { return d.version }

// Acquire takes the session's lease for owner for ttl, or reports the live holder.
func (d *Directory) Acquire(ctx context.Context, s fencing.Session, owner string, ttl time.Duration) (fencing.Reply, error) {
	return d.Apply(ctx, s, fencing.Call{Version: d.version, Op: fencing.Acquire, Owner: owner, TTL: ttl.Milliseconds()})
}

// Renew extends the caller's lease to ttl from now; false if it is no longer held.
func (d *Directory) Renew(ctx context.Context, s fencing.Session, l fencing.Lease, ttl time.Duration) (bool, error) {
	r, err := d.Apply(ctx, s, fencing.Call{Version: d.version, Op: fencing.Renew, Lease: l, TTL: ttl.Milliseconds()})
	return r.OK, err
}

// Release gives the caller's lease up; false if it was no longer held.
func (d *Directory) Release(ctx context.Context, s fencing.Session, l fencing.Lease) (bool, error) {
	r, err := d.Apply(ctx, s, fencing.Call{Version: d.version, Op: fencing.Release, Lease: l})
	return r.OK, err
}

// Validate is the fence: true only while l is the session's live lease.
func (d *Directory) Validate(ctx context.Context, s fencing.Session, l fencing.Lease) (bool, error) {
	r, err := d.Apply(ctx, s, fencing.Call{Version: d.version, Op: fencing.Validate, Lease: l})
	return r.OK, err
}

// Apply runs one call through the version's Lua script. It has the shape of fencing.Apply so
// the two can be run side by side; c.Version must be the directory's version (Backfill runs
// with any).
func (d *Directory) Apply(ctx context.Context, s fencing.Session, c fencing.Call) (fencing.Reply, error) {
	if err := d.naming.CheckSession(s); err != nil {
		return fencing.Reply{}, err
	}
	k := d.naming.Keys(s)
	switch c.Op {
	case fencing.Acquire:
		if c.Version != d.version {
			return fencing.Reply{}, fmt.Errorf("%w: call for version %s on a directory running %s", fencing.ErrBadCall, c.Version, d.version)
		}
		if c.Owner == "" || c.TTL <= 0 {
			return fencing.Reply{}, fmt.Errorf("%w: acquire needs an owner and a positive TTL (owner %q, ttl %d ms)", fencing.ErrBadCall, c.Owner, c.TTL)
		}
		keys := []string{k.OldLease, k.OldGeneration}
		switch d.version {
		case fencing.A, fencing.B:
			keys = []string{k.OldLease, k.OldGeneration, k.NewLease, k.NewGeneration}
		case fencing.C:
			keys = []string{k.NewLease, k.NewGeneration}
		}
		res, err := d.exec(ctx, "acquire "+d.version.String()+" "+s.String(), lua.acquire[d.version], keys, []string{c.Owner, strconv.FormatInt(c.TTL, 10)})
		if err != nil {
			return fencing.Reply{}, err
		}
		return parseAcquire(d.version, c.Owner, res)
	case fencing.Renew, fencing.Release, fencing.Validate:
		if c.Op == fencing.Renew && c.TTL <= 0 {
			return fencing.Reply{}, fmt.Errorf("%w: renew needs a positive TTL (got %d ms)", fencing.ErrBadCall, c.TTL)
		}
		if !d.version.Reads(c.Lease.Space) {
			return fencing.Reply{}, nil // as fencing.Apply: this version never touches that keyspace
		}
		script, args := lua.validate, []string{c.Lease.Value()}
		switch c.Op {
		case fencing.Renew:
			script, args = lua.renew, append(args, strconv.FormatInt(c.TTL, 10))
		case fencing.Release:
			script = lua.release
		}
		res, err := d.exec(ctx, c.Op.String()+" "+s.String(), script, []string{k.Lease(c.Lease.Space)}, args)
		if err != nil {
			return fencing.Reply{}, err
		}
		n, err := res.AsInt64()
		if err != nil {
			return fencing.Reply{}, fmt.Errorf("%w: %s: %v", ErrReply, c.Op, err)
		}
		return fencing.Reply{OK: n == 1}, nil
	case fencing.Backfill:
		return d.backfill(ctx, s)
	}
	return fencing.Reply{}, fmt.Errorf("%w: unknown op %d", fencing.ErrBadCall, c.Op)
}

func (d *Directory) backfill(ctx context.Context, s fencing.Session) (fencing.Reply, error) {
	if d.cluster {
		return fencing.Reply{}, fmt.Errorf("%w: the backfill reads old and new counters of %s", ErrClusterMode, s)
	}
	k := d.naming.Keys(s)
	res, err := d.exec(ctx, "backfill "+s.String(), lua.backfill, []string{k.OldGeneration, k.NewGeneration}, nil)
	if err != nil {
		return fencing.Reply{}, err
	}
	n, err := res.AsInt64()
	if err != nil {
		return fencing.Reply{}, fmt.Errorf("%w: backfill: %v", ErrReply, err)
	}
	return fencing.Reply{OK: n == 1}, nil
}

// exec runs a script: refuses cross-slot keys on a cluster client (valkey-go would panic),
// then EVALSHA with EVAL fallback on NOSCRIPT (valkeygo.Lua), retrying TRYAGAIN.
func (d *Directory) exec(ctx context.Context, op string, s *valkeygo.Lua, keys, args []string) (valkeygo.ValkeyResult, error) {
	if d.cluster {
		if err := sameSlot(keys); err != nil {
			return valkeygo.ValkeyResult{}, fmt.Errorf("valkey: %s: %w", op, err)
		}
	}
	return execRetry(ctx, d.client, d.Retry, &d.TryAgains, op, s, keys, args)
}

func execRetry(ctx context.Context, c valkeygo.Client, r Retry, tries *atomic.Int64, op string, s *valkeygo.Lua, keys, args []string) (valkeygo.ValkeyResult, error) {
	if r.Attempts <= 0 {
		r = DefaultRetry
	}
	for attempt := 1; ; attempt++ {
		res := s.Exec(ctx, c, keys, args)
		err := res.Error()
		if err == nil {
			return res, nil
		}
		if ve, ok := valkeygo.IsValkeyErr(err); ok && ve.IsTryAgain() {
			tries.Add(1)
			if attempt >= r.Attempts {
				return res, fmt.Errorf("valkey: %s: %w (%d attempts; last reply %v)", op, ErrTryAgain, attempt, err)
			}
			select {
			case <-ctx.Done():
				return res, fmt.Errorf("valkey: %s: %w", op, ctx.Err())
			case <-time.After(r.Backoff):
			}
			continue
		}
		return res, wrap(op, err)
	}
}

// sameSlot returns ErrCrossSlot naming the keys when they do not share one hash slot.
func sameSlot(keys []string) error {
	for _, k := range keys[1:] {
		if fencing.Slot(k) != fencing.Slot(keys[0]) {
			return fmt.Errorf("%w: %q is in slot %d, %q in slot %d", ErrCrossSlot, keys[0], fencing.Slot(keys[0]), k, fencing.Slot(k))
		}
	}
	return nil
}

func parseAcquire(v fencing.Version, owner string, res valkeygo.ValkeyResult) (fencing.Reply, error) {
	arr, err := res.ToArray()
	if err != nil || len(arr) < 2 {
		return fencing.Reply{}, fmt.Errorf("%w: acquire %s replied %v (%v)", ErrReply, v, res, err)
	}
	granted, err := arr[0].AsInt64()
	if err != nil {
		return fencing.Reply{}, fmt.Errorf("%w: acquire status: %v", ErrReply, err)
	}
	if granted == 1 {
		g, err := arr[1].AsInt64()
		if err != nil || g <= 0 {
			return fencing.Reply{}, fmt.Errorf("%w: acquire generation %v: %v", ErrReply, arr[1], err)
		}
		return fencing.Reply{OK: true, Lease: fencing.Lease{Space: v.Writes(), Owner: owner, Gen: uint64(g)}}, nil
	}
	if len(arr) != 3 {
		return fencing.Reply{}, fmt.Errorf("%w: refused acquire replied %d elements", ErrReply, len(arr))
	}
	val, err1 := arr[1].ToString()
	spName, err2 := arr[2].ToString()
	if err1 != nil || err2 != nil {
		return fencing.Reply{}, fmt.Errorf("%w: refused acquire: %v %v", ErrReply, err1, err2)
	}
	sp, err := fencing.ParseKeyspace(spName)
	if err != nil {
		return fencing.Reply{}, fmt.Errorf("%w: %v", ErrReply, err)
	}
	h, err := fencing.ParseLease(sp, val)
	if err != nil {
		return fencing.Reply{}, err
	}
	return fencing.Reply{Holder: h}, nil
}
