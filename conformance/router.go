package conformance

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/kernel/render"
)

// RouterRig is one router instance over a few shard backends, set up by a RouterHarness
// for one case. It is written so that a real router (the reference router on real
// Postgres) and the simulator's model can both provide it: nothing in it blocks on
// wall-clock time except Settle, which a model implements by running its scheduler.
type RouterRig interface {
	// Instance is the instance as the control plane sees it; after Restart, the new one.
	Instance() adapters.RouterInstance
	// Database is the database the rig's writes go to (the argument of Pause and Resume).
	Database() string
	// Backends is how many backends Files can spread shards over; at least 3.
	Backends() int
	// Files renders the files of generation g: Database sharded over the given backends,
	// shard i on backends[i].
	Files(t TB, g uint64, backends []int) render.Files
	// BadFiles renders files for generation g that the instance cannot load.
	BadFiles(t TB, g uint64) render.Files
	// Write sends one write of key through the instance and returns at once; its result
	// arrives on the channel (buffered: the rig never blocks on it).
	Write(t TB, key int64) <-chan error
	// Holders lists the backends holding a row written with key, read from the backends
	// themselves, with repeats if a backend holds it more than once.
	Holders(t TB, key int64) []int
	// Settle lets the system run for a while: real time for a real router, scheduler steps
	// until idle for a model. Cases use it to show that something did not happen.
	Settle(t TB)
	// Restart stops the instance and starts it again; it must come back by reading the
	// files the last Apply wrote.
	Restart(t TB)
}

// RouterHarness sets up rigs for the router suite.
type RouterHarness struct {
	// Open returns a rig whose instance has loaded Files(t, 1, []int{0, 1}). The harness
	// stops it in t.Cleanup.
	Open func(t TB) RouterRig
	// Route is the routing function the router claims: the shard of key among n shards.
	// For PgDog and the reference router it is Postgres hash partitioning (kernel/pghash).
	Route func(key int64, n int) int
}

// RouterCase is one contract case.
type RouterCase struct {
	Name string
	Run  func(t TB, h RouterHarness)
}

// RunRouterSuite runs every router case as a subtest.
func RunRouterSuite(t *testing.T, h RouterHarness) {
	for _, c := range RouterCases() {
		t.Run(c.Name, func(t *testing.T) { c.Run(t, h) })
	}
}

// settleRounds bounds how often a case lets the system run while it waits for a write, so
// a router that never answers fails the case instead of hanging the test binary.
const settleRounds = 200

// await waits for a write's result, letting the system run meanwhile.
func await(t TB, rig RouterRig, ch <-chan error, what string) error {
	t.Helper()
	for range settleRounds {
		select {
		case err := <-ch:
			return err
		default:
		}
		rig.Settle(t)
	}
	t.Fatalf("%s: the write did not complete", what)
	return nil
}

// pending reports whether a write is still outstanding (and fails the case if it ended).
func requirePending(t TB, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s: a write to a paused database must wait, but it completed (err = %v)", what, err)
	default:
	}
}

// requireLanded checks that key is held exactly once, by backends[Route(key, len)].
func requireLanded(t TB, h RouterHarness, rig RouterRig, key int64, backends []int, what string) {
	t.Helper()
	want := []int{backends[h.Route(key, len(backends))]}
	require.Equal(t, want, rig.Holders(t, key), "%s: key %d must be stored exactly once, on backend %d (shard %d of %v)",
		what, key, want[0], h.Route(key, len(backends)), backends)
}

func write(t TB, rig RouterRig, key int64, what string) {
	t.Helper()
	require.NoError(t, await(t, rig, rig.Write(t, key), what), "%s: write of key %d", what, key)
}

func observeGen(t TB, rig RouterRig) uint64 {
	t.Helper()
	o, err := rig.Instance().Observe(t.Context())
	require.NoError(t, err)
	require.True(t, o.GenerationKnown, "the instance must report the generation of the files it loaded")
	return o.Generation
}

var (
	layout1 = []int{0, 1}
	layout2 = []int{2, 0, 1} // three shards, and no key keeps its backend by accident of order
)

// keys returns n distinct keys starting at base.
func keys(base int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = base + int64(i)*7919
	}
	return out
}

// RouterCases returns the router contract: RELOAD applies a generation, PAUSE queues and
// RESUME releases (§14.1 of the design).
func RouterCases() []RouterCase {
	return []RouterCase{
		{"ApplyReportsGeneration", func(t TB, h RouterHarness) {
			rig := h.Open(t)
			require.Equal(t, uint64(1), observeGen(t, rig), "the rig starts at generation 1")
			for _, g := range []uint64{2, 5} {
				a, err := rig.Instance().Apply(t.Context(), g, rig.Files(t, g, layout2))
				require.NoError(t, err)
				require.Equal(t, g, a.Generation, "Apply must report the generation it applied")
				require.Equal(t, g, observeGen(t, rig), "Observe after Apply(%d)", g)
			}
		}},
		{"ApplyRoutesByNewShardList", func(t TB, h RouterHarness) {
			rig := h.Open(t)
			before := keys(1000, 12)
			for _, k := range before {
				write(t, rig, k, "generation 1")
				requireLanded(t, h, rig, k, layout1, "generation 1")
			}
			_, err := rig.Instance().Apply(t.Context(), 2, rig.Files(t, 2, layout2))
			require.NoError(t, err)
			moved := 0
			for _, k := range keys(5000, 12) {
				write(t, rig, k, "generation 2")
				requireLanded(t, h, rig, k, layout2, "generation 2")
				if layout2[h.Route(k, len(layout2))] != layout1[h.Route(k, len(layout1))] {
					moved++
				}
			}
			require.NotZero(t, moved, "the keys must include some that generation 2 routes elsewhere")
			for _, k := range before {
				requireLanded(t, h, rig, k, layout1, "rows written at generation 1 stay where they were")
			}
		}},
		{"ApplyWithBadFilesKeepsRouting", func(t TB, h RouterHarness) {
			rig := h.Open(t)
			_, err := rig.Instance().Apply(t.Context(), 2, rig.BadFiles(t, 2))
			require.Error(t, err, "files the instance cannot load must fail Apply")
			var re *adapters.RouterError
			require.ErrorAs(t, err, &re, "Apply's errors are *adapters.RouterError")
			require.Equal(t, rig.Instance().ID(), re.Instance)
			require.Equal(t, uint64(1), observeGen(t, rig), "a failed load keeps the generation loaded before")
			for _, k := range keys(7000, 8) {
				write(t, rig, k, "after a failed Apply")
				requireLanded(t, h, rig, k, layout1, "after a failed Apply")
			}
		}},
		{"PauseQueuesAndResumeReleases", func(t TB, h RouterHarness) {
			rig := h.Open(t)
			inst := rig.Instance()
			require.NoError(t, inst.Pause(t.Context(), rig.Database()))
			o, err := inst.Observe(t.Context())
			require.NoError(t, err)
			require.Contains(t, o.Paused, rig.Database(), "Observe must list the paused database")
			ks := keys(9000, 6)
			var chs []<-chan error
			for _, k := range ks {
				chs = append(chs, rig.Write(t, k))
			}
			rig.Settle(t)
			rig.Settle(t)
			for i, ch := range chs {
				requirePending(t, ch, "key "+strconv.FormatInt(ks[i], 10))
				require.Empty(t, rig.Holders(t, ks[i]), "a held write must not reach a backend")
			}
			require.NoError(t, inst.Resume(t.Context(), rig.Database()))
			for i, ch := range chs {
				require.NoError(t, await(t, rig, ch, "released write"), "a held write must succeed once resumed")
				requireLanded(t, h, rig, ks[i], layout1, "released write")
			}
			o, err = inst.Observe(t.Context())
			require.NoError(t, err)
			require.NotContains(t, o.Paused, rig.Database(), "Observe must not list a resumed database")
		}},
		{"ResumeRoutesByGenerationInForce", func(t TB, h RouterHarness) {
			// The cutover's order: PAUSE, then RELOAD, then RESUME. What was held while the
			// routing changed must go where the new generation says.
			rig := h.Open(t)
			inst := rig.Instance()
			require.NoError(t, inst.Pause(t.Context(), rig.Database()))
			ks := keys(11000, 12)
			var chs []<-chan error
			for _, k := range ks {
				chs = append(chs, rig.Write(t, k))
			}
			rig.Settle(t)
			_, err := inst.Apply(t.Context(), 2, rig.Files(t, 2, layout2))
			require.NoError(t, err)
			for i, ch := range chs {
				requirePending(t, ch, "after Apply while paused, key "+strconv.FormatInt(ks[i], 10))
			}
			require.NoError(t, inst.Resume(t.Context(), rig.Database()))
			for i, ch := range chs {
				require.NoError(t, await(t, rig, ch, "released write"))
				requireLanded(t, h, rig, ks[i], layout2, "a write held across Apply(2)")
			}
		}},
		{"PauseIsIdempotent", func(t TB, h RouterHarness) {
			rig := h.Open(t)
			inst := rig.Instance()
			require.NoError(t, inst.Resume(t.Context(), rig.Database()), "Resume without Pause is harmless")
			write(t, rig, 13000, "after a lone Resume")
			require.NoError(t, inst.Pause(t.Context(), rig.Database()))
			require.NoError(t, inst.Pause(t.Context(), rig.Database()), "a second Pause (a retried command) must succeed")
			ch := rig.Write(t, 13001)
			rig.Settle(t)
			requirePending(t, ch, "paused twice")
			require.NoError(t, inst.Resume(t.Context(), rig.Database()))
			require.NoError(t, await(t, rig, ch, "one Resume after two Pauses"), "one Resume releases however many Pauses came before")
			requireLanded(t, h, rig, 13001, layout1, "paused twice")
		}},
		{"RestartReadsFiles", func(t TB, h RouterHarness) {
			rig := h.Open(t)
			_, err := rig.Instance().Apply(t.Context(), 3, rig.Files(t, 3, layout2))
			require.NoError(t, err)
			rig.Restart(t)
			require.Equal(t, uint64(3), observeGen(t, rig), "a restarted instance loads the files the last Apply wrote")
			for _, k := range keys(15000, 8) {
				write(t, rig, k, "after restart")
				requireLanded(t, h, rig, k, layout2, "after restart")
			}
		}},
	}
}
