package indoubt_test

import (
	"errors"
	"fmt"
	"maps"

	"slices"
	"strings"
	"time"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/check"
	"loam.dev/router/machine"
	"loam.dev/router/machine/indoubt"
	"loam.dev/router/machine/machinetest"
)

var propOpts = indoubt.Options{Period: time.Second, Threshold: 5 * time.Second, Deployment: "prod-app", BlindAfter: 2}

// world is a database with three shards, three coordinator instances that prepare, die and
// restart, and transactions that stay prepared until resolved; a driver that answers,
// fails, loses replies and dies; and the checkers watching every command.
type world struct {
	t      machinetest.TB
	c      machinetest.Chooser
	m      *indoubt.Monitor
	opts   indoubt.Options // the monitor's: propOpts, but for a mutant
	now    int64
	timer  int64
	shards []string                           // tracked
	txns   map[string]map[string]indoubt.Xact // shard -> gid -> xact
	procs  map[string]int64                   // live instance id -> started
	out    []indoubt.Command                  // reads and deliveries in flight
	chk    *check.Decisions                   // the decisions sent, checked with the simulator's code
	used   map[string]bool                    // every gid prepared so far: a gid is never reused, as PgDog's are not
	rounds int64                              // MonitorRound events seen, across driver restarts
	errs   []error
}

var allShards = []string{"s0", "s1", "s2"}

func newWorld(t machinetest.TB, c machinetest.Chooser) *world {
	return newWorldWith(t, c, propOpts)
}

func newWorldWith(t machinetest.TB, c machinetest.Chooser, opts indoubt.Options) *world {
	return &world{t: t, c: c, m: indoubt.New(opts), opts: opts, now: 10_000, txns: map[string]map[string]indoubt.Xact{},
		procs: map[string]int64{"0": 1, "1": 1, "2": 1}, chk: check.NewDecisions(propOpts.Deployment)}
}

func (w *world) violate(format string, a ...any) { w.errs = append(w.errs, fmt.Errorf(format, a...)) }

func (w *world) report(v *detsim.Violation) {
	if v != nil {
		w.violate("%s: %s", v.Invariant, v.Detail)
	}
}

func (w *world) step(in indoubt.Input) {
	var rec machine.Recorder
	cmds := w.m.On(&machine.Ctx{Now: w.now, Trace: &rec}, in)
	w.checkTrace(in, rec.Events)
	for _, c := range cmds {
		switch c := c.(type) {
		case indoubt.ListPrepared, indoubt.ListInstances:
			w.out = append(w.out, c)
		case indoubt.SetTimer:
			w.timer = c.At
		case indoubt.Alert:
			w.out = append(w.out, c)
			if !w.chk.Sent(c.Step) { // a new decision (else sent again until acknowledged)
				w.checkStuck(c)
				w.report(check.NoEarlyAlert(w.named(c), propOpts.Threshold.Milliseconds()))
			}
			w.report(w.chk.Alert(w.now, c))
		case indoubt.ClearAlert:
			w.out = append(w.out, c)
			w.report(w.chk.Clear(w.now, c))
		default:
			w.violate("the monitor issued %T %+v: it may only read, alert and wait", c, c)
		}
	}
}

// reply answers a read from the world as it is now, or fails.
func (w *world) reply(c indoubt.Command, fail bool) indoubt.Input {
	var err error
	if fail {
		err = errors.New("unreachable")
	}
	switch c := c.(type) {
	case indoubt.ListPrepared:
		p := indoubt.Prepared{Step: c.Step, Shard: c.Shard, Err: err}
		if err == nil {
			for _, x := range w.txns[c.Shard] {
				p.Xacts = append(p.Xacts, x)
			}
			slices.SortFunc(p.Xacts, func(a, b indoubt.Xact) int { return strings.Compare(a.GID, b.GID) })
		}
		return p
	case indoubt.Alert:
		w.chk.Delivered(c.Step, err)
		return indoubt.Delivered{Step: c.Step, Err: err}
	case indoubt.ClearAlert:
		w.chk.Delivered(c.Step, err)
		return indoubt.Delivered{Step: c.Step, Err: err}
	case indoubt.ListInstances:
		r := indoubt.Roster{Step: c.Step, Err: err}
		if err == nil {
			for id, started := range w.procs {
				r.Processes = append(r.Processes, indoubt.Process{ID: id, Started: started})
			}
		}
		return r
	}
	panic(fmt.Sprintf("no reply for %T", c))
}

func (w *world) prepare() {
	inst := fmt.Sprint(w.c.IntN(3))
	gid := fmt.Sprintf("__pgdog_2pc_prod-app_%s_%d", inst, w.c.IntN(1000))
	if w.c.IntN(5) == 0 {
		gid = fmt.Sprintf("app_xa_%d", w.c.IntN(1000)) // not PgDog's
	}
	for i, s := range allShards {
		if w.c.IntN(2) == 0 {
			if w.txns[s] == nil {
				w.txns[s] = map[string]indoubt.Xact{}
			}
			g := fmt.Sprintf("%s_%d", gid, i)
			if w.used[g] {
				continue
			}
			if w.used == nil {
				w.used = map[string]bool{}
			}
			w.used[g] = true
			w.txns[s][g] = indoubt.Xact{GID: g, Prepared: w.now - int64(w.c.IntN(10_000))}
		}
	}
}

func (w *world) run(steps int) error {
	for range steps {
		switch w.c.IntN(12) {
		case 0:
			n := 1 + w.c.IntN(len(allShards))
			w.shards = allShards[:n]
			w.step(indoubt.Track{Shards: w.shards})
		case 1:
			w.prepare()
		case 2: // resolve every branch of one shard (an operator, or PgDog's own retry)
			delete(w.txns, allShards[w.c.IntN(len(allShards))])
		case 3: // a coordinator dies, or restarts
			id := fmt.Sprint(w.c.IntN(3))
			if w.c.IntN(2) == 0 {
				delete(w.procs, id)
			} else {
				w.procs[id] = w.now
			}
		case 4, 5, 6: // a read answers (or fails)
			if len(w.out) > 0 {
				i := w.c.IntN(len(w.out))
				c := w.out[i]
				w.out = slices.Delete(w.out, i, i+1)
				w.step(w.reply(c, w.c.IntN(4) == 0))
			}
		case 7: // a reply is lost
			if len(w.out) > 0 {
				i := w.c.IntN(len(w.out))
				w.out = slices.Delete(w.out, i, i+1)
			}
		case 8, 9: // the round timer
			if w.timer != 0 {
				w.now, w.timer = max(w.now, w.timer), 0
				w.step(indoubt.TimerFired{ID: indoubt.RoundTimer})
			}
		case 10: // the driver dies and a new one restores the snapshot
			w.m = machinetest.RoundTrip(w.t, w.m, func(s indoubt.Snapshot) (*indoubt.Monitor, error) { return indoubt.Restore(s, w.opts) })
			w.timer = 0
			w.out = nil
			w.step(indoubt.Restarted{})
		case 11:
			w.now += int64(w.c.IntN(3000))
		}
	}
	w.steady()
	// Everything resolves and every read answers: within two rounds no alert is left.
	w.txns = map[string]map[string]indoubt.Xact{}
	if w.shards == nil {
		w.step(indoubt.Track{Shards: allShards})
	}
	for range 3 {
		for len(w.out) > 0 {
			c := w.out[0]
			w.out = w.out[1:]
			w.step(w.reply(c, false))
		}
		w.now, w.timer = max(w.now, w.timer), 0
		w.step(indoubt.TimerFired{ID: indoubt.RoundTimer})
	}
	for len(w.out) > 0 {
		c := w.out[0]
		w.out = w.out[1:]
		w.step(w.reply(c, false))
	}
	if raised := w.chk.Raised(); len(raised) > 0 {
		w.violate("alerts still raised after everything resolved: %v", slices.Sorted(maps.Keys(raised)))
	}
	if ob := w.m.Snapshot().Outbox; len(ob) > 0 {
		w.violate("deliveries still unacknowledged after every one was answered: %v", ob)
	}
	return errors.Join(w.errs...)
}
