package valkey_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	valkeygo "github.com/valkey-io/valkey-go"
	"pgregory.net/rapid"

	"loam.dev/router/adapters/valkey"
	"loam.dev/router/conformance/redistest"
	"loam.dev/router/kernel/fencing"
)

// The differential test: random sequences of acquire, renew, release, validate, backfill and
// clock advances from several pods on every script version run against kernel/fencing and,
// through the Lua scripts, against a real server. Every reply and every key (value and TTL)
// must agree.
//
// Aligning time. The scripts use the server's own expiry (SET PX, PEXPIRE), which is what
// production relies on, so no test-only clock enters the Lua. The model runs on a logical clock
// in milliseconds. Lease TTLs are long (10–20 min, whole minutes) so the server never expires a
// key on its own during a run. A clock advance by δ is applied to the model by moving `now` and
// to the server by shortening every lease key's TTL by δ in one atomic script (PEXPIRE with the
// remainder, which deletes the key through the server's expiry path when nothing remains). The
// wall time a run takes (well under `tolerance`) is the only drift: a real PTTL must lie in
// [model remaining − tolerance, model remaining]. Advances never stop within `tolerance` of a
// deadline, so the model and the server agree on which leases are gone. TTLs differ by whole
// minutes, so a renew that failed to reset the TTL shows up as a minute of difference.

const tolerance = 5000 // ms

var shift = valkeygo.NewLuaScript(`
local n = 0
for i, k in ipairs(KEYS) do
  local p = redis.call('PTTL', k)
  if p > 0 then
    local left = p - tonumber(ARGV[1])
    if left > 0 then redis.call('PEXPIRE', k, left) else redis.call('DEL', k); n = n + 1 end
  end
end
return n
`)

type diffRun struct {
	t        require.TestingT
	ctx      context.Context
	client   valkeygo.Client
	dirs     map[fencing.Version]*valkey.Directory
	model    fencing.Snapshot
	now      int64
	sessions []fencing.Session
	granted  map[fencing.Session][]fencing.Lease
}

func (r *diffRun) leaseKeys() []string {
	var ks []string
	for _, s := range r.sessions {
		k := fencing.Buzz.Keys(s)
		ks = append(ks, k.OldLease, k.NewLease)
	}
	return ks
}

// remaining lists the model's live lease deadlines relative to now.
func (r *diffRun) remaining() []int64 {
	var out []int64
	for _, k := range r.leaseKeys() {
		if e, ok := r.model[k]; ok && e.ExpiresAt > r.now {
			out = append(out, e.ExpiresAt-r.now)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// advance moves both clocks by delta (see the file comment).
func (r *diffRun) advance(delta int64) {
	r.now += delta
	r.model.Expire(r.now)
	require.NoError(r.t, shift.Exec(r.ctx, r.client, r.leaseKeys(), []string{strconv.FormatInt(delta, 10)}).Error())
}

// safeDelta adjusts a wanted advance so that no deadline lies within tolerance of it.
func (r *diffRun) safeDelta(want int64) int64 {
	d := want
	for _, rem := range r.remaining() {
		if rem > d-tolerance && rem <= d+tolerance {
			d = rem + tolerance // step past this deadline, clear of it
		}
	}
	return d
}

func (r *diffRun) compareKeys(label string) {
	var real []string
	var cursor uint64
	for {
		e, err := r.client.Do(r.ctx, r.client.B().Scan().Cursor(cursor).Count(1000).Build()).AsScanEntry()
		require.NoError(r.t, err)
		real = append(real, e.Elements...)
		if cursor = e.Cursor; cursor == 0 {
			break
		}
	}
	slices.Sort(real)
	r.model.Expire(r.now)
	require.Equal(r.t, r.model.Keys(), real, "%s: key sets differ", label)
	for _, k := range real {
		v, err := r.client.Do(r.ctx, r.client.B().Get().Key(k).Build()).ToString()
		require.NoError(r.t, err)
		p, err := r.client.Do(r.ctx, r.client.B().Pttl().Key(k).Build()).AsInt64()
		require.NoError(r.t, err)
		e := r.model[k]
		require.Equal(r.t, e.Value, v, "%s: value of %s", label, k)
		if e.ExpiresAt == 0 {
			require.Equal(r.t, int64(-1), p, "%s: %s must not expire", label, k)
		} else {
			want := e.ExpiresAt - r.now
			require.True(r.t, p <= want && p >= want-tolerance, "%s: %s PTTL %d, model remaining %d", label, k, p, want)
		}
	}
}

func (r *diffRun) step(t *rapid.T, i int) {
	pod := fmt.Sprintf("pod%d", rapid.IntRange(1, 3).Draw(t, "pod"))
	s := rapid.SampledFrom(r.sessions).Draw(t, "session")
	v := fencing.Version(rapid.IntRange(0, 3).Draw(t, "version"))
	ttl := int64(rapid.IntRange(10, 20).Draw(t, "ttl-min")) * 60_000
	call := fencing.Call{Version: v, TTL: ttl}
	switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
	case op < 3:
		call.Op, call.Owner = fencing.Acquire, pod
	case op < 8 && len(r.granted[s]) > 0:
		call.Op = []fencing.Op{fencing.Renew, fencing.Release, fencing.Validate}[rapid.IntRange(0, 2).Draw(t, "which")]
		call.Lease = rapid.SampledFrom(r.granted[s]).Draw(t, "lease")
	case op == 8:
		call.Op = fencing.Backfill
	default:
		// Advance: either to just past a live lease's deadline, or by a random amount.
		rem := r.remaining()
		var d int64
		if len(rem) > 0 && rapid.Bool().Draw(t, "to-deadline") {
			d = r.safeDelta(rapid.SampledFrom(rem).Draw(t, "deadline") + tolerance)
		} else {
			d = r.safeDelta(int64(rapid.IntRange(1, 600).Draw(t, "seconds")) * 1000)
		}
		r.advance(d)
		r.compareKeys(fmt.Sprintf("step %d advance %d", i, d))
		return
	}
	want, werr := fencing.Apply(r.model, fencing.Buzz.Keys(s), r.now, call, fencing.NoMutant)
	got, gerr := r.dirs[v].Apply(r.ctx, s, call)
	label := fmt.Sprintf("step %d %s %s v%s %s owner=%s lease=%s", i, pod, call.Op, v, s, call.Owner, call.Lease)
	require.NoError(r.t, werr, label)
	require.NoError(r.t, gerr, label)
	require.Equal(r.t, want, got, label)
	if call.Op == fencing.Acquire && got.OK {
		r.granted[s] = append(r.granted[s], got.Lease)
	}
	r.compareKeys(label)
}

func TestRealDifferential(t *testing.T) {
	srv := redistest.StartStandalone(t)
	c := srv.Client
	dirs := map[fencing.Version]*valkey.Directory{}
	for _, v := range fencing.Versions {
		d, err := valkey.NewDirectory(c, fencing.Buzz, v)
		require.NoError(t, err)
		dirs[v] = d
	}
	ctx := context.Background()
	ops := 0
	start := time.Now()
	rapid.Check(t, func(t *rapid.T) {
		require.NoError(t, c.Do(ctx, c.B().Flushall().Build()).Error())
		r := &diffRun{t: t, ctx: ctx, client: c, dirs: dirs, model: fencing.Snapshot{},
			sessions: []fencing.Session{{Community: "acme", ID: "s1"}, {Community: "acme", ID: "s2"}, {Community: "a:tunnel:b", ID: "x}y{"}},
			granted:  map[fencing.Session][]fencing.Lease{}}
		n := rapid.IntRange(1, 60).Draw(t, "steps")
		for i := range n {
			r.step(t, i)
		}
		ops += n
	})
	t.Logf("%d operations compared in %s", ops, time.Since(start).Round(time.Millisecond))
}
