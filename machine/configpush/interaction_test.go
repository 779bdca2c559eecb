package configpush_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/configpush"
	"loam.dev/router/machine/machinetest"
)

// TestInteraction replays the scenario files under testdata/, each also with the machine
// restored from its snapshot before every directive (see machinetest.Scripts).
func TestInteraction(t *testing.T) {
	machinetest.Scripts(t, "testdata", newEnv)
}

// env is the interaction harness: one machine, a clock, a seeded rng, and the timers the
// machine has set, so a script can fire them by id.
type env struct {
	opts   configpush.Options
	m      *configpush.Machine
	now    int64
	rng    *rand.Rand
	timers machinetest.Timers
	// store is the newest record a push brought (the store's record now) and files the
	// files last pushed for each generation (rendered with the secrets of now): a restore
	// renders again from them, as the driver does.
	store *shardmap.Record
	files map[uint64]render.Files
	// rotated is set by a secrets directive until the next restart.
	rotated bool
}

func newEnv() *env {
	e := &env{}
	e.reset(configpush.Options{})
	return e
}

func (e *env) reset(opts configpush.Options) {
	e.opts = opts
	e.m = configpush.New(opts)
	e.now = 1000
	e.rng = rand.New(rand.NewChaCha8([32]byte{'l', 'o', 'a', 'm'}))
	e.timers = machinetest.Timers{}
	e.store, e.files = nil, map[uint64]render.Files{}
}

// Restore implements machinetest.Harness. After a secrets directive the restore is not the
// identity (the push ends: its files no longer match), so it is not checked as one.
func (e *env) Restore(t testing.TB) {
	if e.rotated {
		b, err := json.Marshal(e.m.Snapshot())
		require.NoError(t, err)
		var s configpush.Snapshot
		require.NoError(t, json.Unmarshal(b, &s))
		e.m, err = configpush.RestoreWithFiles(s, e.store, e.files[e.store.Generation], e.opts)
		require.NoError(t, err)
		return
	}
	e.m = machinetest.RoundTrip(t, e.m, func(s configpush.Snapshot) (*configpush.Machine, error) {
		if e.store == nil {
			return configpush.Restore(s, e.opts)
		}
		rec := e.store
		if e.opts.Mutant != 0 && s.Push != nil && s.Push.Generation > rec.Generation {
			// A mutant pushes what the store does not publish; the restore check would
			// refuse its snapshot (property_test catches the mutant in the act instead).
			r := *rec
			r.Generation = s.Push.Generation
			rec = &r
		}
		return configpush.RestoreWithFiles(s, rec, e.files[rec.Generation], e.opts)
	})
}

// Handle implements machinetest.Harness.
func (e *env) Handle(t *testing.T, d *datadriven.TestData) string {
	if d.Cmd == "options" {
		e.reset(parseOptions(t, d))
		return "ok"
	}
	if d.HasArg("advance") {
		var ms int64
		d.ScanArgs(t, "advance", &ms)
		e.now += ms
	}
	var in configpush.Input
	switch d.Cmd {
	case "push":
		p := parsePush(t, d)
		if r := p.Record; r != nil && r.Version > 0 && (e.store == nil || r.Router.Name == e.store.Router.Name && r.Generation >= e.store.Generation) {
			e.store = r
		}
		if p.Record != nil && (p.Generation == p.Record.Generation || e.opts.Mutant != 0) {
			e.files[p.Generation] = p.Files
		}
		in = p
	case "files-written":
		in = configpush.FilesWritten{Step: "g" + strconv.FormatUint(machinetest.Arg[uint64](t, d, "gen", 0), 10) + "/files", Attempt: machinetest.Arg(t, d, "attempt", 1), Err: parseErr(d)}
	case "reloaded":
		id := machinetest.Arg(t, d, "instance", "")
		in = configpush.Reloaded{Step: fmt.Sprintf("g%d/reload/%s", machinetest.Arg[uint64](t, d, "gen", 0), id), Attempt: machinetest.Arg(t, d, "attempt", 1), Instance: id, Err: parseErr(d)}
	case "files-seen":
		// files-seen gen=<pushed> instance=<id> seen=<generation the pod sees> [attempt=n] [err=...]
		id := machinetest.Arg(t, d, "instance", "")
		in = configpush.FilesSeen{Step: fmt.Sprintf("g%d/visible/%s", machinetest.Arg[uint64](t, d, "gen", 0), id), Attempt: machinetest.Arg(t, d, "attempt", 1), Instance: id,
			Generation: machinetest.Arg[uint64](t, d, "seen", 0), Err: parseErr(d)}
	case "observed":
		id := machinetest.Arg(t, d, "instance", "")
		in = configpush.Observed{Step: fmt.Sprintf("g%d/observe/%s", machinetest.Arg[uint64](t, d, "gen", 0), id), Attempt: machinetest.Arg(t, d, "attempt", 1), Instance: id,
			Generation: machinetest.Arg[uint64](t, d, "observed", 0), Known: !d.HasArg("unknown"), Err: parseErr(d)}
	case "fire":
		// fire id=<timer>: move the clock to the timer's deadline and deliver it.
		// fire id=<timer> raced: deliver a timer that was cancelled (it raced the cancel).
		id := machinetest.Arg(t, d, "id", "")
		at, ok := e.timers.Take(id)
		if !ok && !d.HasArg("raced") {
			d.Fatalf(t, "timer %q is not pending; pending: %v", id, e.timers.List())
		}
		e.now = max(e.now, at)
		in = configpush.TimerFired{ID: id}
	case "restart":
		// The driver died: replies in flight are lost and timers are gone. A new driver
		// restores the persisted snapshot and feeds Restarted.
		e.Restore(t)
		e.rotated = false
		e.timers = machinetest.Timers{}
		in = configpush.Restarted{}
	case "secrets":
		// secrets gen=<g> password=<p>: the secrets change under the driver (a rotated
		// password); a restore renders generation g's files with them.
		p := parsePush(t, d)
		e.files[p.Generation] = p.Files
		e.rotated = true
		return "ok"
	case "timers":
		if len(e.timers) == 0 {
			return "(none)"
		}
		return strings.Join(e.timers.List(), "\n")
	case "snapshot":
		b, err := json.MarshalIndent(e.m.Snapshot(), "", "  ")
		require.NoError(t, err)
		return string(b)
	default:
		d.Fatalf(t, "unknown directive %q", d.Cmd)
	}
	rec := &machine.Recorder{}
	ctx := &machine.Ctx{Now: e.now, Rand: e.rng, Trace: rec}
	cmds := e.m.On(ctx, in)
	var b strings.Builder
	for _, c := range cmds {
		e.timers.Record(c)
		fmt.Fprintf(&b, "cmd %v\n", c)
	}
	for _, ev := range rec.Take() {
		require.Equal(t, e.now, ev.T)
		fmt.Fprintf(&b, "spec %v\n", ev)
	}
	if b.Len() == 0 {
		return "(nothing)"
	}
	return b.String()
}

func parseErr(d *datadriven.TestData) error {
	if d.HasArg("newer") {
		return fmt.Errorf("configmap holds generation 9: %w", configpush.ErrNewerGeneration)
	}
	return machinetest.Err(d)
}

func parseOptions(t *testing.T, d *datadriven.TestData) configpush.Options {
	o := configpush.Options{
		StepTimeout:   time.Duration(machinetest.Arg[int64](t, d, "timeout", 0)) * time.Millisecond,
		Backoff:       time.Duration(machinetest.Arg[int64](t, d, "backoff", 0)) * time.Millisecond,
		MaxBackoff:    time.Duration(machinetest.Arg[int64](t, d, "max-backoff", 0)) * time.Millisecond,
		MaxAttempts:   machinetest.Arg(t, d, "max-attempts", 0),
		AwaitFiles:    d.HasArg("await-files"),
		AwaitAttempts: machinetest.Arg(t, d, "await-attempts", 0),
	}
	switch m := machinetest.Arg(t, d, "mutant", "none"); m {
	case "none":
	case "write-unpublished":
		o.Mutant = configpush.MutantWriteUnpublished
	case "regress":
		o.Mutant = configpush.MutantRegress
	case "no-reload-retry":
		o.Mutant = configpush.MutantNoReloadRetry
	default:
		d.Fatalf(t, "unknown mutant %q", m)
	}
	return o
}

// parsePush: push gen=4 [published=4] [version=7] [db=app] [unstored] [norecord]
// [nofiles] instances=(a,b)
func parsePush(t *testing.T, d *datadriven.TestData) configpush.Push {
	gen := machinetest.Arg[uint64](t, d, "gen", 0)
	rec := &shardmap.Record{
		Version:    machinetest.Arg[uint64](t, d, "version", 1),
		Generation: machinetest.Arg(t, d, "published", gen),
		Router:     shardmap.Router{Kind: shardmap.PgDog, Name: machinetest.Arg(t, d, "db", "app")},
	}
	if d.HasArg("unstored") {
		rec.Version = 0
	}
	if d.HasArg("norecord") {
		rec = nil
	}
	var files render.Files
	if !d.HasArg("nofiles") {
		var err error
		files, err = render.NewFiles(
			render.File{Name: "pgdog.toml", Data: fmt.Appendf(nil, "# generation %d\n", gen)},
			render.File{Name: "users.toml", Data: []byte("[[users]]\npassword = \"" + machinetest.Arg(t, d, "password", "pw") + "\"\n")})
		require.NoError(t, err)
	}
	return configpush.Push{Record: rec, Generation: gen, Files: files, Instances: machinetest.Vals(d, "instances")}
}

// TestScenariosCoverEveryAction: every action the machine can emit appears in some
// scenario, and no scenario shows an action the machine does not declare.
func TestScenariosCoverEveryAction(t *testing.T) {
	require.ElementsMatch(t, configpush.Actions, machinetest.ScriptActions(t, os.DirFS("testdata"), configpush.Spec))
}
