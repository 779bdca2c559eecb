package vtctld_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/memstore"
	"loam.dev/router/adapters/vtctld"
	"loam.dev/router/conformance/vitesstest"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/keyrange"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine/vreshard"
)

var reshardRuns atomic.Int32

// crashing wraps the executor: once after the command crashAfter names has been executed,
// it cancels the run, so the run dies with that command done and its answer unsaved; and
// it times the steps.
type crashing struct {
	next       *driver.VReshardExecutor
	crashAfter func(vreshard.Command) bool
	crash      context.CancelFunc
	mu         sync.Mutex
	crashed    bool
	at         map[string]time.Time // first time each kind of command was executed
	copyDone   time.Time
	switched   [2]time.Time // the primary Switch's start and end
}

func (c *crashing) Execute(ctx context.Context, cmd vreshard.Command) (vreshard.Input, bool) {
	start := time.Now()
	in, ok := c.next.Execute(ctx, cmd)
	c.mu.Lock()
	defer c.mu.Unlock()
	k := fmt.Sprintf("%T", cmd)
	if _, seen := c.at[k]; !seen {
		c.at[k] = start
	}
	if p, isP := in.(vreshard.Progress); isP && p.Err == nil && !p.Copying && c.copyDone.IsZero() {
		c.copyDone = time.Now()
	}
	if s, isS := cmd.(vreshard.Switch); isS && slices.Contains(s.Types, "primary") && !s.Reverse {
		if r, _ := in.(vreshard.Reply); r.Err == nil && c.switched[1].IsZero() {
			c.switched = [2]time.Time{start, time.Now()}
		}
	}
	if !c.crashed && c.crashAfter(cmd) {
		c.crashed = true
		c.crash()
	}
	return in, ok
}

// TestRealReshard drives machine/vreshard through driver.Run against a real Vitess: keyspace
// rs, one shard 0 with rows, resharded to -80 and 80- while a writer inserts through vtgate
// all along. The controller is killed once, right after the switch of the reads took effect
// and before its answer was saved; a new run resumes from the snapshot. Checked: the run
// ends Completed; the record mirrors the serving partition (-80, 80-, no target); every
// acknowledged row is on exactly the shard the record locates it to, and on no other
// (locate agrees with where vtgate and VReplication put real rows); per shard, the row
// count and a CRC32 checksum of the rows equal those of the acknowledged rows the record
// locates there; lost = 0.
func TestRealReshard(t *testing.T) {
	c := vt.Get(t)
	ks := "rs" + strconv.Itoa(int(reshardRuns.Add(1))) // a keyspace per run: -count=N shares the cluster
	c.CreateKeyspace(t, ks)
	src := c.AddShards(t, ks, "0")[0]
	c.MustVtctldclient(t, "ApplySchema", "--sql", vitesstest.WriterSchema, ks)
	c.MustVtctldclient(t, "ApplyVSchema", "--vschema", vitesstest.WriterVSchema, ks)
	// The target shards exist (not serving) before vtgate starts, as in a deployment
	// where vtgate has been running: a vtgate started earlier finds tablets it did not see
	// only at its next topology refresh (--tablet-refresh-interval, 1 min), which is a
	// write pause of the test's making, not of the switch.
	tgt := c.AddShards(t, ks, "-80", "80-")
	g := c.StartVtgate(t, ks)
	db, err := sql.Open("mysql", g.DSN(ks))
	require.NoError(t, err)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// The writer: inserts through vtgate all along; a refused insert is not acknowledged.
	w := vitesstest.NewWriter(db)
	const preload = 3000
	require.NoError(t, w.Preload(ctx, preload))
	w.Start(ctx, 1)
	defer w.Stop()

	rec, err := shardmap.NewVindex(ks, shardmap.Key{Column: "id", Type: shardmap.Bigint}, shardmap.VindexHash,
		shardmap.Backend{Host: "127.0.0.1", Port: uint16(src.MySQLPort), Database: src.DBName(), Tablet: src.Alias})
	require.NoError(t, err)
	rec.Shards[0].Name = "0"
	v := rec.Layout.Scheme.(shardmap.Vindex)
	v.Ranges = []keyrange.Range{keyrange.MustParse("0")}
	rec.Layout.Scheme = v
	store := memstore.New()
	ref := adapters.DBRef{Namespace: "test", Database: ks}
	_, err = store.CAS(ctx, ref, 0, rec)
	require.NoError(t, err)
	rec, err = store.Read(ctx, ref)
	require.NoError(t, err)

	cl := dial(t, vtctld.Config{Addr: c.VtctldAddr, Timeout: 2 * time.Minute})
	byShard := map[string]*vitesstest.Tablet{"-80": tgt[0], "80-": tgt[1]}
	// verify: every row on a target shard is one the stored record locates there, and
	// vtgate serves at least every row acknowledged before the check began.
	verify := func(ctx context.Context, keyspace string, shards []string) error {
		want := w.Acked()
		cur, err := store.Read(ctx, ref)
		if err != nil {
			return err
		}
		for _, sh := range shards {
			for _, id := range vitesstest.Ints(t, byShard[sh], "SELECT id FROM t") {
				loc, err := cur.Layout.Locate(strconv.FormatInt(id, 10))
				if err != nil {
					return err
				}
				if loc.Name != sh {
					return fmt.Errorf("%w: row %d is on %s, the record locates it on %s", driver.ErrVerifyFailed, id, sh, loc.Name)
				}
			}
		}
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&n); err != nil {
			return err
		}
		if n < want {
			return fmt.Errorf("%w: vtgate serves %d rows, %d were acknowledged", driver.ErrVerifyFailed, n, want)
		}
		return nil
	}
	var done vreshard.Done
	exec := &driver.VReshardExecutor{DB: ref, Store: store, Workflows: cl, Control: cl, Verify: verify,
		OnDone: func(d vreshard.Done) { done = d }}
	blobs := memstore.New()
	runCtx, crash := context.WithCancel(ctx)
	wrap := &crashing{next: exec, crash: crash, at: map[string]time.Time{}, crashAfter: func(c vreshard.Command) bool {
		s, ok := c.(vreshard.Switch)
		return ok && !s.Reverse && !slices.Contains(s.Types, "primary")
	}}
	start := vreshard.Start{Record: rec, Workflow: "split", Cell: vitesstest.Cell, Source: []string{"0"}, Target: []string{"-80", "80-"},
		Backends: map[string]shardmap.Backend{
			"-80": {Host: "127.0.0.1", Port: uint16(tgt[0].MySQLPort), Database: tgt[0].DBName(), Tablet: tgt[0].Alias},
			"80-": {Host: "127.0.0.1", Port: uint16(tgt[1].MySQLPort), Database: tgt[1].DBName(), Tablet: tgt[1].Alias},
		},
		// finalize_after ends the hold after the switch on its own (the serve test finalizes
		// by hand).
		Options: vreshard.Options{PollEvery: 500, RetryAfter: 1000, MaxLagMs: 10000, FinalizeAfter: 1000}}
	began := time.Now()
	err = driver.Run(runCtx, driver.VReshard(wrap), driver.Config[vreshard.Input]{ID: ref.String(), Store: blobs}, vreshard.Input(start))
	require.ErrorIs(t, err, context.Canceled, "the first run is killed after the reads switch")
	require.True(t, wrap.crashed)
	require.Zero(t, done.Outcome, "the first run did not end")
	// The standby: a new run, the same snapshot store.
	require.NoError(t, driver.Run(ctx, driver.VReshard(wrap), driver.Config[vreshard.Input]{ID: ref.String(), Store: blobs}))
	elapsed := time.Since(began)
	w.Stop()
	require.Equal(t, vreshard.Completed, done.Outcome, done.Reason)

	final, err := store.Read(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, []string{"-80", "80-"}, []string{final.Shards[0].Name, final.Shards[1].Name})
	require.Nil(t, final.Target)
	require.Equal(t, shardmap.Serving, final.State.Phase)
	parts, err := cl.SrvKeyspace(ctx, ks, vitesstest.Cell)
	require.NoError(t, err)
	var live []string
	for _, s := range adapters.Serving(parts, adapters.TabletPrimary) {
		live = append(live, s.Name)
	}
	require.Equal(t, []string{"-80", "80-"}, live, "the record mirrors the serving partition")

	// Per shard: the rows the record locates there, by count and checksum, and nothing else.
	rows, err := w.Check(ctx, tgt, func(id int64) (string, error) {
		loc, err := final.Layout.Locate(strconv.FormatInt(id, 10))
		return loc.Name, err
	})
	require.NoError(t, err)
	for _, r := range rows {
		require.Equal(t, [2]uint64{r.WantRows, r.WantSum}, [2]uint64{r.Rows, r.Sum}, "shard %s: rows and checksum", r.Shard)
		require.Zero(t, r.Misplaced, "shard %s: locate and Vitess agree on every acknowledged row", r.Shard)
		require.Zero(t, r.Lost, "shard %s: acknowledged writes lost", r.Shard)
		t.Logf("shard %s: %d rows, crc32 sum %d", r.Shard, r.Rows, r.Sum)
	}
	pause := w.LongestPause(wrap.switched[0], wrap.switched[1])
	t.Logf("reshard 0 -> -80,80-: %d rows acknowledged (%d before), %d writes refused, lost 0; whole run %v; copy %v (Create to copy done); SwitchTraffic primary %v, longest write pause through vtgate around it %v",
		w.Acked(), preload, w.Refused(), elapsed.Round(time.Millisecond), wrap.copyDone.Sub(wrap.at["vreshard.Create"]).Round(time.Millisecond),
		wrap.switched[1].Sub(wrap.switched[0]).Round(time.Millisecond), pause.Round(time.Millisecond))
}
