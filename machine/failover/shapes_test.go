package failover_test

// The tests below were added when make mutate showed that the properties' fixtures reached
// only one shape of failover (a PgDog or Vitess shard whose promoted replica is on another
// host, no reshard running, the old primary answering sooner or later), so that ordinary
// mistakes in the other shapes (a dropped port comparison, a reshard target's generation, the
// fence's try count, the rebase bound, the refusals) changed nothing any check looked at.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/failover"
	"loam.dev/router/machine/machinetest"
)

// describes checks that a command's log line names what it does: its step and the server it
// acts on (host:port, and the database and tablet when they are set, not otherwise). The
// lines are what an operator reads in the daemon's log; one naming the wrong server, or a
// reason that is not there, misleads. It returns what is wrong, or "".
func describes(c failover.Command) string {
	s := c.String()
	var need, not []string
	var bs []shardmap.Backend
	switch c := c.(type) {
	case failover.FenceOld:
		need = append(need, "step="+c.Step, "shard="+c.Shard, "role="+c.Role)
		bs = append(bs, c.Backend)
	case failover.Reparent:
		need = append(need, "step="+c.Step, "keyspace="+c.Keyspace, "shard="+c.Shard, "tablet="+c.Tablet)
	case failover.WriteRecord:
		need = append(need, "step="+c.Step, fmt.Sprintf("expect=%d", c.Expect), fmt.Sprintf("gen=%d", c.Record.Generation))
		shard := strings.Split(c.Step, "/")[1]
		b, ok := backendOf(c.Record, shard)
		if !ok {
			return fmt.Sprintf("%q writes a record without shard %s", s, shard)
		}
		bs = append(bs, b)
	case failover.Push:
		need = append(need, "step="+c.Step, fmt.Sprintf("gen=%d", c.Generation))
	case failover.Alert:
		need = append(need, "step="+c.Step, "reason="+c.Reason)
	case failover.Done:
		need = append(need, "outcome="+c.Outcome.String(), fmt.Sprintf("gen=%d fenced=%v", c.Generation, c.Fenced))
		if c.Reason != "" {
			need = append(need, "reason="+c.Reason)
		} else {
			not = append(not, "reason=")
		}
	}
	for _, b := range bs {
		need = append(need, fmt.Sprintf("backend=%s:%d", b.Host, b.Port))
		if b.Database != "" {
			need = append(need, fmt.Sprintf("%s:%d/%s", b.Host, b.Port, b.Database))
		}
		if b.Tablet != "" {
			need = append(need, "tablet="+b.Tablet)
		} else {
			not = append(not, "tablet=")
		}
	}
	for _, n := range need {
		if !strings.Contains(s, n) {
			return fmt.Sprintf("%q does not say %q", s, n)
		}
	}
	for _, n := range not {
		if strings.Contains(s, n) {
			return fmt.Sprintf("%q says %q, which is not set", s, n)
		}
	}
	return ""
}

// reshardFixture is pgFixture while a reshard to four shards n0..n3 runs: the target will be
// published as generation 5.
func reshardFixture() *shardmap.Record {
	rec, _, _ := pgFixture()
	be := func(i int) shardmap.Backend {
		return shardmap.Backend{Host: fmt.Sprintf("10.0.2.%d", i), Port: 5432, Database: "app",
			Replicas: []shardmap.Endpoint{{Host: fmt.Sprintf("10.0.2.%d", 10+i), Port: 5432}}}
	}
	key := shardmap.Key{Column: "customer_id", Type: shardmap.Bigint}
	t := shardmap.NewPgHash("app", key, be(1), be(2), be(3), be(4)).Layout
	for i := range t.Shards {
		t.Shards[i].Name = fmt.Sprintf("n%d", i)
	}
	rec.Target = &t
	rec.State = shardmap.State{Phase: shardmap.Resharding, To: rec.Generation + 1}
	return rec
}

// TestPropertyShapes is TestPropertyFailover over the other shapes a failover takes: Start
// naming the promoted primary's replicas, a promoted primary on the old one's host (another
// port), a record that already names the promoted primary, a reshard running (the shard in
// the serving layout, or in the target), and Vitess. Whatever the answers and restarts, every
// world invariant holds and the failover ends Repointed at a new generation with the replicas
// it must have.
func TestPropertyShapes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rec, shard, promoted := pgFixture()
		switch rapid.IntRange(0, 5).Draw(t, "shape") {
		case 0:
			promoted.Replicas = []shardmap.Endpoint{{Host: "10.0.1.22", Port: 5432}, {Host: "10.0.1.32", Port: 5432}}
		case 1:
			promoted = shardmap.Backend{Host: "10.0.1.2", Port: 5433, Database: "app"}
		case 2:
			promoted = shardmap.Backend{Host: "10.0.1.2", Port: 5432, Database: "app"}
		case 3:
			rec = reshardFixture()
		case 4:
			rec, shard, promoted = reshardFixture(), "n2", shardmap.Backend{Host: "10.0.2.13", Port: 5432, Database: "app"}
		case 5:
			rec, shard, promoted = vtFixture()
			promoted.Replicas = []shardmap.Endpoint{{Host: "10.0.3.4", Port: 3306}}
		}
		chaos := rapid.IntRange(0, 80).Draw(t, "chaos")
		done, _, v, log := runShape(rapidChooser{t}, rec, shard, promoted, chaos, failover.Mutants{}, nil)
		if len(v) > 0 || done.Outcome != failover.Repointed {
			t.Fatalf("violations %v, done %v\n%s", v, done, strings.Join(log, "\n"))
		}
	})
}

// drive feeds the machine until it ends: answer answers each command the world does not
// answer itself (nil: the world's answer); timers fire in order; retries are checked to come
// RetryAfter to 1.5×RetryAfter after the failure.
func drive(t *rapid.T, w *world, start failover.Start, retryAfter int64, answer func(failover.Command) failover.Input) *failover.Done {
	m := failover.New()
	ctx := &machine.Ctx{Now: 1000, Rand: rand.New(rand.NewPCG(1, 2)), Trace: machine.Discard}
	queue := m.On(ctx, start)
	var done *failover.Done
	for steps := 0; len(queue) > 0 && steps < 10000; steps++ {
		c := queue[0]
		queue = queue[1:]
		if v := describes(c); v != "" {
			w.violate("%s", v)
		}
		w.checkStep(c)
		var in failover.Input
		switch c := c.(type) {
		case failover.SetTimer:
			if c.At < ctx.Now+retryAfter || c.At > ctx.Now+retryAfter+retryAfter/2 {
				t.Fatalf("retry set for %d, %d ms after the failure; want %d to %d ms", c.At, c.At-ctx.Now, retryAfter, retryAfter+retryAfter/2)
			}
			ctx.Now = c.At
			in = failover.TimerFired{ID: c.ID}
		case failover.Alert:
			w.alerts = append(w.alerts, c)
		case failover.Done:
			done = &c
			w.checkEnd(c)
		default:
			if in = answer(c); in == nil {
				in = w.apply(c, nil, false)
			}
		}
		if in != nil {
			queue = append(queue, m.On(ctx, in)...)
		}
	}
	return done
}

func fixtureOf(vitess bool) (*shardmap.Record, string, shardmap.Backend) {
	if vitess {
		return vtFixture()
	}
	return pgFixture()
}

// TestPropertyOldPrimaryDown: an old primary that never answers its fence (down, the usual
// reason for a failover) is tried exactly Attempts times (once, if the refusal is permanent),
// each retry RetryAfter to 1.5×RetryAfter after the failure (defaults 3 and 500 ms), and then
// the failover goes on with one alert naming the old primary and ends Repointed, not fenced.
func TestPropertyOldPrimaryDown(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rec, shard, promoted := fixtureOf(rapid.Bool().Draw(t, "vitess"))
		attempts := rapid.IntRange(0, 5).Draw(t, "attempts")
		retryAfter := rapid.Int64Range(0, 2000).Draw(t, "retryAfter")
		permanent := rapid.Bool().Draw(t, "permanent")
		wantTries, wantRetry := attempts, retryAfter
		if wantTries == 0 {
			wantTries = 3
		}
		if wantRetry == 0 {
			wantRetry = 500
		}
		if permanent {
			wantTries = 1
		}
		w := newWorld(rec, shard, promoted, wantTries)
		start := failover.Start{Record: rec, Shard: shard, Promoted: promoted, Role: "app",
			Options: failover.Options{Attempts: attempts, RetryAfter: retryAfter}}
		done := drive(t, w, start, wantRetry, func(c failover.Command) failover.Input {
			f, ok := c.(failover.FenceOld)
			if !ok {
				return nil
			}
			w.fenceTries++
			return failover.Reply{Step: f.Step, Attempt: f.Attempt, Err: errors.New("dial tcp: connection refused"), Permanent: permanent}
		})
		require.NotNil(t, done, "the failover never ended")
		require.Empty(t, w.violations)
		require.Equal(t, failover.Repointed, done.Outcome)
		require.False(t, done.Fenced)
		require.Equal(t, wantTries, w.fenceTries, "fence tries")
		old, _ := backendOf(rec, shard)
		require.Len(t, w.alerts, 1)
		require.Contains(t, w.alerts[0].Reason, "could not be fenced")
		require.Contains(t, w.alerts[0].Reason, fmt.Sprintf("%s:%d", old.Host, old.Port))
	})
}

// TestPropertyRecordKeepsChanging: while someone else writes the record before every one of
// the repoint's writes, the repoint is made again on top, MaxRebases times, then the failover
// ends Failed ("keeps changing") instead of chasing the record forever; if the shard leaves
// the record meanwhile it ends Failed at once ("no longer in the record"). Either way the
// store never names the promoted primary and Done has the record that won.
func TestPropertyRecordKeepsChanging(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rec, shard, promoted := fixtureOf(rapid.Bool().Draw(t, "vitess"))
		goneAt := rapid.IntRange(-1, failover.MaxRebases).Draw(t, "goneAt") // -1: never
		w := newWorld(rec, shard, promoted, 3)
		writes := 0
		start := failover.Start{Record: rec, Shard: shard, Promoted: promoted, Role: "app", Options: failover.Options{RetryAfter: 100}}
		done := drive(t, w, start, 100, func(c failover.Command) failover.Input {
			if _, ok := c.(failover.WriteRecord); !ok {
				return nil
			}
			if writes == goneAt {
				w.removeShard()
			} else {
				w.foreignBump()
			}
			writes++
			return w.apply(c, nil, false)
		})
		require.NotNil(t, done, "the failover never ended (%d writes)", writes)
		require.Empty(t, w.violations)
		require.Equal(t, failover.Failed, done.Outcome)
		if goneAt < 0 {
			require.Equal(t, failover.MaxRebases+1, writes, "writes")
			require.Contains(t, done.Reason, "keeps changing")
		} else {
			require.Equal(t, goneAt+1, writes, "writes")
			require.Contains(t, done.Reason, "is no longer in the record")
		}
		if b, ok := backendOf(w.store, shard); ok {
			require.False(t, samePlace(b, promoted), "the store names the promoted primary")
		}
		require.Equal(t, w.store.Generation, done.Generation)
	})
}

// TestStartRefused: an invalid start does nothing but end Refused, with the record's
// generation and a reason; the ended machine survives a restart (it says Done again) and
// ignores what comes later. A Vitess start needs no role (the MySQL executor fences its own
// way); a PgDog one does.
func TestStartRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		vitess bool
		edit   func(*failover.Start)
		reason string // "": accepted
	}{
		"no record":         {false, func(s *failover.Start) { s.Record = nil }, "no record"},
		"no host":           {false, func(s *failover.Start) { s.Promoted.Host = "" }, "host:port"},
		"no port":           {true, func(s *failover.Start) { s.Promoted.Port = 0 }, "host:port"},
		"no tablet":         {true, func(s *failover.Start) { s.Promoted.Tablet = "" }, "tablet alias"},
		"pgdog no role":     {false, func(s *failover.Start) { s.Role = "" }, "no application role"},
		"vitess no role":    {true, func(s *failover.Start) { s.Role = "" }, ""},
		"pgdog, no tablet":  {false, func(s *failover.Start) { s.Promoted.Tablet = "" }, ""},
		"invalid record":    {false, func(s *failover.Start) { s.Record.Generation = 0 }, "record is invalid"},
		"shard not in it":   {true, func(s *failover.Start) { s.Shard = "c0-" }, `shard "c0-" is not in`},
		"vitess, no edit":   {true, func(*failover.Start) {}, ""},
		"target shard only": {false, func(s *failover.Start) { s.Record, s.Shard = reshardFixture(), "n1" }, ""},
	} {
		t.Run(name, func(t *testing.T) {
			rec, shard, promoted := fixtureOf(tc.vitess)
			start := failover.Start{Record: rec, Shard: shard, Promoted: promoted, Role: "app"}
			tc.edit(&start)
			m := failover.New()
			ctx := &machine.Ctx{Now: 1000, Trace: machine.Discard}
			out := m.On(ctx, start)
			require.NotEmpty(t, out)
			if tc.reason == "" {
				require.IsType(t, failover.FenceOld{}, out[0], "accepted: the old primary is fenced first")
				_, ended := m.Done()
				require.False(t, ended)
				return
			}
			gen := uint64(0)
			if start.Record != nil {
				gen = start.Record.Generation
			}
			want := failover.Done{Outcome: failover.Refused, Generation: gen, Reason: out[0].(failover.Done).Reason}
			require.Equal(t, []failover.Command{want}, out, "a refusal only ends")
			require.Contains(t, want.Reason, tc.reason)
			require.True(t, strings.HasPrefix(want.Reason, "start: "), want.Reason)
			o, ended := m.Done()
			require.True(t, ended)
			require.Equal(t, failover.Refused, o)
			m = machinetest.RoundTrip(t, m, failover.Restore)
			require.Equal(t, []failover.Command{want}, m.On(ctx, failover.Restarted{}), "a restored ended machine says Done again")
			require.Empty(t, m.On(ctx, failover.Reply{Step: "app/s1/4/fence", Attempt: 1}))
			require.Empty(t, m.On(ctx, start), "a second start is ignored")
		})
	}
}

// TestRestoreRefusesAnotherShard: a snapshot whose shard is not in its start record (a
// hand-edited or corrupt one) is refused, for every stage a running machine can be in,
// rather than restored into a machine that would index a shard that is not there.
func TestRestoreRefusesAnotherShard(t *testing.T) {
	rec, shard, promoted := pgFixture()
	w := newWorld(rec, shard, promoted, 3)
	m := failover.New()
	ctx := &machine.Ctx{Now: 1000, Trace: machine.Discard}
	out := m.On(ctx, failover.Start{Record: rec, Shard: shard, Promoted: promoted, Role: "app"})
	for stages := 0; ; stages++ {
		b, err := json.Marshal(m.Snapshot())
		require.NoError(t, err)
		var raw map[string]any
		require.NoError(t, json.Unmarshal(b, &raw))
		if _, ended := m.Done(); ended {
			require.Equal(t, 3, stages, "fence, repoint and push")
			return
		}
		raw["Start"].(map[string]any)["Shard"] = "s7"
		b, err = json.Marshal(raw)
		require.NoError(t, err)
		var s failover.Snapshot
		require.NoError(t, json.Unmarshal(b, &s))
		_, err = failover.Restore(s)
		require.ErrorContains(t, err, `shard "s7" is not in the start record`, "stage %d", stages)
		require.NotEmpty(t, out)
		out = m.On(ctx, w.apply(out[0], nil, false))
	}
}

// TestOutcomeString: every outcome has its own name and no value makes String panic.
func TestOutcomeString(t *testing.T) {
	names := map[string]failover.Outcome{}
	for o := range failover.Outcome(255) {
		s := o.String()
		if o >= failover.Repointed && o <= failover.Failed {
			require.NotContains(t, s, "Outcome(")
			require.NotContains(t, names, s, "%d and %d share a name", names[s], o)
			names[s] = o
			continue
		}
		require.Equal(t, fmt.Sprintf("Outcome(%d)", o), s)
	}
}

// TestPropertyStageRetries: a step after the fence (Reparent, the record write, Push) that
// fails k times is retried until it succeeds, and raises one alert, on its Attempts-th
// failure, saying how often it failed, and none if it failed fewer times.
func TestPropertyStageRetries(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		vitess := rapid.Bool().Draw(t, "vitess")
		rec, shard, promoted := fixtureOf(vitess)
		attempts := rapid.IntRange(1, 5).Draw(t, "attempts")
		fails := rapid.IntRange(0, 8).Draw(t, "fails")
		stage := "repoint"
		if rapid.Bool().Draw(t, "other") {
			stage = map[bool]string{true: "reparent", false: "push"}[vitess]
		}
		w := newWorld(rec, shard, promoted, attempts)
		failed := 0
		start := failover.Start{Record: rec, Shard: shard, Promoted: promoted, Role: "app", Options: failover.Options{Attempts: attempts, RetryAfter: 100}}
		done := drive(t, w, start, 100, func(c failover.Command) failover.Input {
			if !strings.Contains(stepOf(c), "/"+stage) || failed == fails {
				return nil
			}
			failed++
			in := w.apply(c, errors.New("i/o timeout"), false)
			if failed == attempts {
				require.Empty(t, w.alerts, "alert before the %d-th failure", attempts)
			}
			return in
		})
		require.NotNil(t, done)
		require.Empty(t, w.violations)
		require.Equal(t, failover.Repointed, done.Outcome)
		if fails < attempts {
			require.Empty(t, w.alerts)
			return
		}
		require.Len(t, w.alerts, 1)
		require.Contains(t, w.alerts[0].Reason, fmt.Sprintf("failed %d times", attempts))
		require.Contains(t, w.alerts[0].Reason, "retrying until it succeeds")
	})
}

// TestRetriesJittered: retries after failures are spread, RetryAfter plus up to half of it
// drawn from ctx.Rand, so that the machines a bad minute hit do not all retry at once; with
// no ctx.Rand (a replay without randomness) each comes exactly RetryAfter later.
func TestRetriesJittered(t *testing.T) {
	for _, withRand := range []bool{true, false} {
		rec, shard, promoted := pgFixture()
		m := failover.New()
		ctx := &machine.Ctx{Now: 1000, Trace: machine.Discard}
		if withRand {
			ctx.Rand = rand.New(rand.NewPCG(7, 8))
		}
		out := m.On(ctx, failover.Start{Record: rec, Shard: shard, Promoted: promoted, Role: "app",
			Options: failover.Options{RetryAfter: 1000, Attempts: 100}})
		delays := map[int64]bool{}
		for range 20 {
			require.Len(t, out, 1)
			f := out[0].(failover.FenceOld)
			out = m.On(ctx, failover.Reply{Step: f.Step, Attempt: f.Attempt, Err: errors.New("connection refused")})
			require.Len(t, out, 1)
			timer := out[0].(failover.SetTimer)
			d := timer.At - ctx.Now
			require.True(t, d >= 1000 && d <= 1500, "retry %d ms after the failure", d)
			delays[d] = true
			ctx.Now = timer.At
			out = m.On(ctx, failover.TimerFired{ID: timer.ID})
		}
		if withRand {
			require.Greater(t, len(delays), 5, "20 retries drew %d distinct delays", len(delays))
		} else {
			require.Equal(t, map[int64]bool{1000: true}, delays)
		}
	}
}
