package configpush_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
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
)

// TestInteraction replays the scenario files under testdata/ (regenerate with -rewrite and
// read the diff before committing it). Every file runs twice: once with one machine, and once
// with the machine snapshotted, encoded as JSON, decoded and restored before every
// directive. Both runs must print the same transcript, which is how every scenario also
// tests restart from every snapshot it passes through.
func TestInteraction(t *testing.T) {
	for _, mode := range []string{"plain", "restore-every-step"} {
		t.Run(mode, func(t *testing.T) {
			datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
				env := newEnv(mode == "restore-every-step")
				datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
					return env.handle(t, d)
				})
			})
		})
	}
}

// env is the interaction harness: one machine, a clock, a seeded rng, and the timers the
// machine has set, so a script can fire them by id.
type env struct {
	restoreEveryStep bool
	opts             configpush.Options
	m                *configpush.Machine
	now              int64
	rng              *rand.Rand
	timers           map[string]int64
}

func newEnv(restoreEveryStep bool) *env {
	e := &env{restoreEveryStep: restoreEveryStep}
	e.reset(configpush.Options{})
	return e
}

func (e *env) reset(opts configpush.Options) {
	e.opts = opts
	e.m = configpush.New(opts)
	e.now = 1000
	e.rng = rand.New(rand.NewChaCha8([32]byte{'l', 'o', 'a', 'm'}))
	e.timers = map[string]int64{}
}

// roundTrip snapshots the machine, encodes it as the driver does, and restores it.
func roundTrip(t testing.TB, m *configpush.Machine, opts configpush.Options) *configpush.Machine {
	t.Helper()
	b, err := json.Marshal(m.Snapshot())
	require.NoError(t, err)
	var s configpush.Snapshot
	require.NoError(t, json.Unmarshal(b, &s))
	r, err := configpush.Restore(s, opts)
	require.NoError(t, err)
	b2, err := json.Marshal(r.Snapshot())
	require.NoError(t, err)
	require.JSONEq(t, string(b), string(b2), "snapshot does not survive encode/decode/restore")
	return r
}

func (e *env) handle(t *testing.T, d *datadriven.TestData) string {
	if d.Cmd == "options" {
		e.reset(parseOptions(t, d))
		return "ok"
	}
	if e.restoreEveryStep {
		e.m = roundTrip(t, e.m, e.opts)
	}
	if d.HasArg("advance") {
		var ms int64
		d.ScanArgs(t, "advance", &ms)
		e.now += ms
	}
	var in configpush.Input
	switch d.Cmd {
	case "push":
		in = parsePush(t, d)
	case "files-written":
		in = configpush.FilesWritten{Step: "g" + strconv.FormatUint(arg[uint64](t, d, "gen", 0), 10) + "/files", Attempt: arg(t, d, "attempt", 1), Err: parseErr(d)}
	case "reloaded":
		id := arg(t, d, "instance", "")
		in = configpush.Reloaded{Step: fmt.Sprintf("g%d/reload/%s", arg[uint64](t, d, "gen", 0), id), Attempt: arg(t, d, "attempt", 1), Instance: id, Err: parseErr(d)}
	case "observed":
		id := arg(t, d, "instance", "")
		in = configpush.Observed{Step: fmt.Sprintf("g%d/observe/%s", arg[uint64](t, d, "gen", 0), id), Attempt: arg(t, d, "attempt", 1), Instance: id,
			Generation: arg[uint64](t, d, "observed", 0), Known: !d.HasArg("unknown"), Err: parseErr(d)}
	case "fire":
		// fire id=<timer>: move the clock to the timer's deadline and deliver it.
		// fire id=<timer> raced: deliver a timer that was cancelled (it raced the cancel).
		id := arg(t, d, "id", "")
		at, ok := e.timers[id]
		if !ok && !d.HasArg("raced") {
			d.Fatalf(t, "timer %q is not pending; pending: %v", id, e.pending())
		}
		delete(e.timers, id)
		e.now = max(e.now, at)
		in = configpush.TimerFired{ID: id}
	case "restart":
		// The driver died: replies in flight are lost and timers are gone. A new driver
		// restores the persisted snapshot and feeds Restarted.
		e.m = roundTrip(t, e.m, e.opts)
		e.timers = map[string]int64{}
		in = configpush.Restarted{}
	case "timers":
		return strings.Join(e.pending(), "\n")
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
		switch c := c.(type) {
		case configpush.SetTimer:
			e.timers[c.ID] = c.At
		case configpush.CancelTimer:
			delete(e.timers, c.ID)
		}
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

func (e *env) pending() []string {
	var out []string
	for id, at := range e.timers {
		out = append(out, fmt.Sprintf("%s at=%d", id, at))
	}
	slices.Sort(out)
	if out == nil {
		return []string{"(none)"}
	}
	return out
}

// arg reads an optional argument, with a default.
func arg[T any](t *testing.T, d *datadriven.TestData, key string, def T) T {
	if !d.HasArg(key) {
		return def
	}
	var v T
	d.ScanArgs(t, key, &v)
	return v
}

func list(t *testing.T, d *datadriven.TestData, key string) []string {
	a, ok := d.Arg(key)
	if !ok {
		return nil
	}
	if len(a.Vals) == 1 && a.Vals[0] == "" {
		return nil // key=()
	}
	return slices.Clone(a.Vals)
}

func parseErr(d *datadriven.TestData) error {
	if d.HasArg("newer") {
		return fmt.Errorf("configmap holds generation 9: %w", configpush.ErrNewerGeneration)
	}
	a, ok := d.Arg("err")
	if !ok {
		return nil
	}
	return errors.New(strings.Join(a.Vals, " "))
}

func parseOptions(t *testing.T, d *datadriven.TestData) configpush.Options {
	o := configpush.Options{
		StepTimeout: time.Duration(arg[int64](t, d, "timeout", 0)) * time.Millisecond,
		Backoff:     time.Duration(arg[int64](t, d, "backoff", 0)) * time.Millisecond,
		MaxBackoff:  time.Duration(arg[int64](t, d, "max-backoff", 0)) * time.Millisecond,
		MaxAttempts: arg(t, d, "max-attempts", 0),
	}
	switch m := arg(t, d, "mutant", "none"); m {
	case "none":
	case "write-unpublished":
		o.Mutant = configpush.MutantWriteUnpublished
	case "regress":
		o.Mutant = configpush.MutantRegress
	default:
		d.Fatalf(t, "unknown mutant %q", m)
	}
	return o
}

// parsePush: push gen=4 [published=4] [version=7] [db=app] [unstored] [norecord]
// [nofiles] instances=(a,b)
func parsePush(t *testing.T, d *datadriven.TestData) configpush.Push {
	gen := arg[uint64](t, d, "gen", 0)
	rec := &shardmap.Record{
		Version:    arg[uint64](t, d, "version", 1),
		Generation: arg(t, d, "published", gen),
		Router:     shardmap.Router{Kind: shardmap.PgDog, Name: arg(t, d, "db", "app")},
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
			render.File{Name: "users.toml", Data: []byte("[[users]]\n")})
		require.NoError(t, err)
	}
	return configpush.Push{Record: rec, Generation: gen, Files: files, Instances: list(t, d, "instances")}
}
