package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/conformance"
	"loam.dev/router/kernel/pghash"
	"loam.dev/router/kernel/render"
)

// A naive in-memory router for the router suite's mutant test: backends are maps of key to
// row count, files are one line "gen=<g> backends=<i,j,...>". Unmutated it passes the whole
// suite, so every failure under a mutation is the mutation's doing.

func pgRoute(key int64, n int) int { return int(pghash.ShardOfInt8(key, uint64(n))) }

type naiveRig struct {
	mu      sync.Mutex
	rows    []map[int64]int
	disk    render.Files // what the instance reads on start
	router  *naiveRouter
	mutants map[string]bool
}

type naiveRouter struct {
	rig    *naiveRig
	mu     sync.Mutex
	gen    uint64
	layout []int
	pauses int
	gate   chan struct{} // nil when not paused
	first  []int         // the layout loaded at start, for the routes-by-first mutant
}

func naiveFiles(g uint64, backends []int) render.Files {
	var b strings.Builder
	fmt.Fprintf(&b, "gen=%d backends=", g)
	for i, x := range backends {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(x))
	}
	fs, _ := render.NewFiles(render.File{Name: "naive.conf", Data: []byte(b.String())})
	return fs
}

func parseNaive(fs render.Files) (uint64, []int, error) {
	f, ok := fs.Get("naive.conf")
	if !ok {
		return 0, nil, errors.New("no naive.conf")
	}
	var g uint64
	var list string
	if _, err := fmt.Sscanf(string(f.Data), "gen=%d backends=%s", &g, &list); err != nil {
		return 0, nil, err
	}
	var out []int
	for _, s := range strings.Split(list, ",") {
		i, err := strconv.Atoi(s)
		if err != nil {
			return 0, nil, err
		}
		out = append(out, i)
	}
	return g, out, nil
}

func (rig *naiveRig) start() {
	r := &naiveRouter{rig: rig}
	g, l, err := parseNaive(rig.disk)
	if err != nil {
		panic(err)
	}
	if rig.mutants["restart-from-initial"] && rig.router != nil {
		g, l = 1, []int{0, 1}
	}
	r.gen, r.layout, r.first = g, l, l
	rig.router = r
}

func (r *naiveRouter) m(name string) bool { return r.rig.mutants[name] }

func (r *naiveRouter) ID() string { return "naive-1" }

func (r *naiveRouter) Apply(ctx context.Context, g uint64, files render.Files) (adapters.Applied, error) {
	r.rig.mu.Lock()
	r.rig.disk = files
	r.rig.mu.Unlock()
	fg, l, err := parseNaive(files)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		if r.m("bad-files-clobber") {
			r.gen = g
		}
		return adapters.Applied{}, &adapters.RouterError{Instance: r.ID(), Op: "Apply", Err: err}
	}
	if !r.m("apply-skips-reload") {
		r.layout = l
	}
	if !r.m("observe-stale") {
		r.gen = fg
	}
	return adapters.Applied{Generation: g}, nil
}

func (r *naiveRouter) Pause(ctx context.Context, db string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m("pause-ignored") {
		return nil
	}
	r.pauses++
	if r.gate == nil {
		r.gate = make(chan struct{})
	}
	return nil
}

func (r *naiveRouter) Resume(ctx context.Context, db string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gate == nil {
		return nil
	}
	r.pauses--
	if r.m("pause-counts") && r.pauses > 0 {
		return nil
	}
	if !r.m("resume-forgets-held") {
		close(r.gate)
	}
	r.gate, r.pauses = nil, 0
	return nil
}

func (r *naiveRouter) Observe(ctx context.Context) (adapters.Observed, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := adapters.Observed{Version: "naive", Generation: r.gen, GenerationKnown: true}
	if r.gate != nil {
		o.Paused = []string{"app"}
	}
	return o, nil
}

func (r *naiveRouter) exec(key int64) error {
	r.mu.Lock()
	layout := r.layout
	gate := r.gate
	r.mu.Unlock()
	if gate != nil {
		if r.m("pause-fails-writes") {
			return errors.New("database is paused")
		}
		<-gate
		if !r.m("held-routed-at-arrival") {
			r.mu.Lock()
			layout = r.layout
			r.mu.Unlock()
		}
	}
	if r.m("routes-by-first") {
		layout = r.first
	}
	shard := pgRoute(key, len(layout))
	if r.m("wrong-hash") {
		shard = int(uint64(key) % uint64(len(layout)))
	}
	r.rig.mu.Lock()
	defer r.rig.mu.Unlock()
	r.rig.rows[layout[shard]][key]++
	if r.m("write-twice") {
		r.rig.rows[layout[(shard+1)%len(layout)]][key]++
	}
	return nil
}

func (rig *naiveRig) Instance() adapters.RouterInstance { return rig.router }
func (rig *naiveRig) Database() string                  { return "app" }
func (rig *naiveRig) Backends() int                     { return len(rig.rows) }
func (rig *naiveRig) Files(_ conformance.TB, g uint64, b []int) render.Files {
	return naiveFiles(g, b)
}
func (rig *naiveRig) BadFiles(_ conformance.TB, g uint64) render.Files {
	fs, _ := render.NewFiles(render.File{Name: "naive.conf", Data: []byte("not a config")})
	return fs
}
func (rig *naiveRig) Write(_ conformance.TB, key int64) <-chan error {
	ch := make(chan error, 1)
	r := rig.router
	go func() { ch <- r.exec(key) }()
	return ch
}
func (rig *naiveRig) Holders(_ conformance.TB, key int64) []int {
	rig.mu.Lock()
	defer rig.mu.Unlock()
	var out []int
	for i, rows := range rig.rows {
		for range rows[key] {
			out = append(out, i)
		}
	}
	return out
}
func (rig *naiveRig) Settle(conformance.TB) { time.Sleep(2 * time.Millisecond) }
func (rig *naiveRig) Restart(conformance.TB) {
	rig.mu.Lock()
	defer rig.mu.Unlock()
	rig.start()
}

func naiveRouterHarness(mutant string) conformance.RouterHarness {
	m := map[string]bool{mutant: true}
	return conformance.RouterHarness{
		Route: pgRoute,
		Open: func(conformance.TB) conformance.RouterRig {
			rig := &naiveRig{rows: []map[int64]int{{}, {}, {}}, disk: naiveFiles(1, []int{0, 1}), mutants: m}
			rig.start()
			return rig
		},
	}
}

func runRouterCase(c conformance.RouterCase, h conformance.RouterHarness) (bool, []string) {
	out := conformance.Record(context.Background(), c.Name, func(tb conformance.TB) { c.Run(tb, h) })
	return out.Failed, out.Msgs
}

// TestRouterSuiteCatchesMutants: each broken router must fail the cases named for it, and
// the unbroken one must pass every case.
func TestRouterSuiteCatchesMutants(t *testing.T) {
	mutants := map[string][]string{
		"":                       nil,
		"apply-skips-reload":     {"ApplyRoutesByNewShardList", "ResumeRoutesByGenerationInForce"},
		"observe-stale":          {"ApplyReportsGeneration"},
		"routes-by-first":        {"ApplyRoutesByNewShardList", "ResumeRoutesByGenerationInForce"},
		"bad-files-clobber":      {"ApplyWithBadFilesKeepsRouting"},
		"pause-ignored":          {"PauseQueuesAndResumeReleases", "ResumeRoutesByGenerationInForce", "PauseIsIdempotent"},
		"pause-fails-writes":     {"PauseQueuesAndResumeReleases", "ResumeRoutesByGenerationInForce", "PauseIsIdempotent"},
		"resume-forgets-held":    {"PauseQueuesAndResumeReleases", "ResumeRoutesByGenerationInForce", "PauseIsIdempotent"},
		"held-routed-at-arrival": {"ResumeRoutesByGenerationInForce"},
		"pause-counts":           {"PauseIsIdempotent"},
		"restart-from-initial":   {"RestartReadsFiles"},
		"write-twice":            {"ApplyRoutesByNewShardList", "PauseQueuesAndResumeReleases"},
		"wrong-hash":             {"ApplyRoutesByNewShardList", "ApplyWithBadFilesKeepsRouting"},
	}
	for mutant, mustFail := range mutants {
		t.Run("mutant="+mutant, func(t *testing.T) {
			t.Parallel()
			h := naiveRouterHarness(mutant)
			var failed []string
			for _, c := range conformance.RouterCases() {
				if bad, msgs := runRouterCase(c, h); bad {
					failed = append(failed, c.Name)
					if mutant == "" {
						t.Errorf("the unmutated router fails %s: %v", c.Name, msgs)
					}
				}
			}
			for _, name := range mustFail {
				if !slices.Contains(failed, name) {
					t.Errorf("mutant %q was not caught by case %s (failing cases: %v)", mutant, name, failed)
				}
			}
		})
	}
}

// TestNaiveRouterPassesSuite runs the suite the ordinary way, as a harness of a real router would.
func TestNaiveRouterPassesSuite(t *testing.T) {
	conformance.RunRouterSuite(t, naiveRouterHarness(""))
}
