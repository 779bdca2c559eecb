package configpush_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/check"
	"loam.dev/router/machine"
	"loam.dev/router/machine/configpush"
	"loam.dev/router/machine/machinetest"
)

// kubeletWorld is a push on Kubernetes: the ConfigMap is written at once, but each pod
// sees the new files only lag[pod] milliseconds later (the kubelet's sync), and a RELOAD
// re-reads whatever the pod sees at that moment. Replies take a few milliseconds and some
// fail; timers fire on time. It checks, with the simulator's code (detsim/check), that an
// instance is Confirmed only when it loaded the pushed generation (check.Confirmed), that
// with AwaitFiles no RELOAD goes to a pod that cannot see the files yet
// (check.ReloadSeen), and ConfigPush's step invariants (check.Steps); and that the trace's
// ok field of every answer is whether it succeeded, and that every instance is Confirmed
// when the lag fits the retry budget.
type kubeletWorld struct {
	c        machinetest.Chooser
	opts     configpush.Options
	m        *configpush.Machine
	rng      *rand.Rand
	now      int64
	lag      map[string]int64  // per pod, how long after the write it sees the files
	written  int64             // when the files of generation 2 were written; -1 before
	loaded   map[string]uint64 // what each instance routes by
	events   []kubeletEvent
	seq      int
	outcome  *configpush.Outcome
	failures int
	steps    *check.Steps
	errs     []error
}

type kubeletEvent struct {
	at, seq int64
	in      configpush.Input // a reply or a timer
	timer   string
}

const kubeletGen = 2

func newKubeletWorld(c machinetest.Chooser, opts configpush.Options, lag map[string]int64) *kubeletWorld {
	w := &kubeletWorld{c: c, opts: opts, m: configpush.New(opts), rng: rand.New(rand.NewChaCha8([32]byte{2})),
		now: 1000, lag: lag, written: -1, loaded: map[string]uint64{}, steps: check.NewSteps()}
	for id := range lag {
		w.loaded[id] = kubeletGen - 1
	}
	return w
}

// sees is the generation of the files pod id sees now.
func (w *kubeletWorld) sees(id string) uint64 {
	if w.written >= 0 && w.now >= w.written+w.lag[id] {
		return kubeletGen
	}
	return kubeletGen - 1
}

func (w *kubeletWorld) at(d int64, in configpush.Input, timer string) {
	w.seq++
	w.events = append(w.events, kubeletEvent{at: w.now + d, seq: int64(w.seq), in: in, timer: timer})
}

// fail fails a reply, at most twice a run: liveness is claimed for a bounded number of
// failures, which the budget of attempts covers.
func (w *kubeletWorld) fail() error {
	if w.failures < 2 && w.c.IntN(4) == 3 {
		w.failures++
		return errors.New("connection reset")
	}
	return nil
}

func (w *kubeletWorld) report(v *detsim.Violation) {
	if v != nil {
		w.errs = append(w.errs, fmt.Errorf("%s: %s", v.Invariant, v.Detail))
	}
}

func (w *kubeletWorld) step(in configpush.Input) {
	if fw, ok := in.(configpush.FilesWritten); ok {
		w.steps.Answered(fw.Step)
	}
	rec := &machine.Recorder{}
	ctx := &machine.Ctx{Now: w.now, Rand: w.rng, Trace: rec}
	cmds := w.m.On(ctx, in)
	if err := okMismatch(in, rec.Take()); err != nil {
		w.errs = append(w.errs, err)
	}
	for _, c := range cmds {
		latency := int64(1 + w.c.IntN(200))
		switch c := c.(type) {
		case configpush.WriteFiles:
			w.report(w.steps.WriteFiles(w.now, c.Step, c.Generation, kubeletGen, w.now+w.opts.WithDefaults().StepTimeout.Milliseconds()))
			err := w.fail()
			if err == nil {
				w.steps.Written(c.Generation)
			}
			if err == nil && w.written < 0 {
				w.written = w.now
			}
			w.at(latency, configpush.FilesWritten{Step: c.Step, Attempt: c.Attempt, Err: err}, "")
		case configpush.AwaitFiles:
			w.at(latency, configpush.FilesSeen{Step: c.Step, Attempt: c.Attempt, Instance: c.Instance, Generation: w.sees(c.Instance), Err: w.fail()}, "")
		case configpush.Reload:
			w.report(w.steps.Reload(w.now, c.Instance, c.Generation))
			if w.opts.AwaitFiles {
				w.report(check.ReloadSeen(w.now, c.Instance, c.Generation, w.sees(c.Instance)))
			}
			err := w.fail()
			if err == nil {
				w.loaded[c.Instance] = w.sees(c.Instance)
			}
			w.at(latency, configpush.Reloaded{Step: c.Step, Attempt: c.Attempt, Instance: c.Instance, Err: err}, "")
		case configpush.Observe:
			w.at(latency, configpush.Observed{Step: c.Step, Attempt: c.Attempt, Instance: c.Instance, Generation: w.loaded[c.Instance], Known: true, Err: w.fail()}, "")
		case configpush.SetTimer:
			w.events = slices.DeleteFunc(w.events, func(e kubeletEvent) bool { return e.timer == c.ID })
			w.seq++
			w.events = append(w.events, kubeletEvent{at: max(c.At, w.now), seq: int64(w.seq), in: configpush.TimerFired{ID: c.ID}, timer: c.ID})
		case configpush.CancelTimer:
			w.events = slices.DeleteFunc(w.events, func(e kubeletEvent) bool { return e.timer == c.ID })
		case configpush.Outcome:
			w.steps.Outcome(c.Generation, c.Refused != "")
			w.report(check.Confirmed(w.now, c.Generation, c.Confirmed, func(id string) uint64 { return w.loaded[id] }))
			w.outcome = &c
		}
	}
}

func (w *kubeletWorld) run() error {
	ids := make([]string, 0, len(w.lag))
	for id := range w.lag {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	rec := (&world{}).record(kubeletGen)
	w.step(configpush.Push{Record: rec, Generation: kubeletGen, Files: filesFor(kubeletGen), Instances: ids})
	for n := 0; len(w.events) > 0 && w.outcome == nil; n++ {
		if n > 100000 {
			return errors.New("no outcome after 100000 events")
		}
		slices.SortFunc(w.events, func(a, b kubeletEvent) int {
			if a.at != b.at {
				return int(a.at - b.at)
			}
			return int(a.seq - b.seq)
		})
		e := w.events[0]
		w.events = w.events[1:]
		w.now = max(w.now, e.at)
		w.step(e.in)
	}
	w.report(w.steps.Ended(w.now))
	if len(w.errs) > 0 {
		return errors.Join(w.errs...)
	}
	if w.outcome == nil {
		return errors.New("the push never reported an Outcome")
	}
	if len(w.outcome.Confirmed) != len(ids) {
		return fmt.Errorf("not every instance converges: lag %v gave %v", w.lag, w.outcome)
	}
	return nil
}

// kubeletOpts: the defaults but for fewer failures tolerated, so a run is short.
var kubeletOpts = configpush.Options{StepTimeout: 10 * time.Second, Backoff: time.Second, MaxBackoff: 10 * time.Second, MaxAttempts: 8}

func drawLag(t *rapid.T, most int64) map[string]int64 {
	lag := map[string]int64{}
	for _, id := range []string{"pod-0", "pod-1", "pod-2"} {
		lag[id] = rapid.Int64Range(0, most).Draw(t, "lag/"+id)
	}
	return lag
}

// TestKubeletDelay: with the files reaching pods up to 90 s after the write, AwaitFiles
// reloads each pod only once it sees them and every pod is confirmed; without it, a
// RELOAD that re-read the old files is retried, so pods whose lag fits the reload budget
// (8 attempts, 22.5 s of backoff at least, of which two failed replies may take a share) are confirmed too. No run confirms a pod
// early.
func TestKubeletDelay(t *testing.T) {
	t.Run("await-files", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			opts := kubeletOpts
			opts.AwaitFiles = true
			require.NoError(t, newKubeletWorld(machinetest.Rapid(t), opts, drawLag(t, 90_000)).run())
		})
	})
	t.Run("reload-retry", func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			require.NoError(t, newKubeletWorld(machinetest.Rapid(t), kubeletOpts, drawLag(t, 10_000)).run())
		})
	})
}

// TestKubeletDelayCatches: the checks above fail without the protections. Without the
// retry of a RELOAD that re-read old files, a pod whose files arrive late is never
// confirmed; without AwaitFiles (the option off while the check expects it), or with it but
// an answer for the old files taken as seen (MutantSeenAny), a RELOAD reaches a pod that
// still shows the old files; confirming on the RELOAD's answer without observing
// (MutantConfirmOnReload) confirms a pod that re-read the old files.
func TestKubeletDelayCatches(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  func(*configpush.Options)
		check bool // run the AwaitFiles check while the option is off
		want  string
	}{
		{"no-reload-retry", func(o *configpush.Options) { o.Mutant = configpush.MutantNoReloadRetry }, false, "not every instance converges"},
		{"no-await", func(o *configpush.Options) {}, true, check.InvReloadAfterSeen},
		{"seen-any", func(o *configpush.Options) { o.AwaitFiles, o.Mutant = true, configpush.MutantSeenAny }, true, check.InvReloadAfterSeen},
		{"confirm-on-reload", func(o *configpush.Options) { o.Mutant = configpush.MutantConfirmOnReload }, false, check.InvConfirmedLoaded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 200; seed++ {
				opts := kubeletOpts
				tc.opts(&opts)
				c := machinetest.Seeded(seed)
				w := newKubeletWorld(c, opts, map[string]int64{"pod-0": 5000, "pod-1": 12_000, "pod-2": 0})
				w.opts.AwaitFiles = tc.check // the world's check only, not the machine's option
				if err := w.run(); err != nil && containsErr(err, tc.want) {
					t.Logf("caught at seed %d: %v", seed, err)
					return
				}
			}
			t.Fatalf("%s was not caught in 200 seeds", tc.name)
		})
	}
}

func containsErr(err error, s string) bool {
	return err != nil && strings.Contains(err.Error(), s)
}
