package indoubt_test

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

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
	t       machinetest.TB
	c       machinetest.Chooser
	m       *indoubt.Monitor
	now     int64
	timer   int64
	shards  []string                           // tracked
	txns    map[string]map[string]indoubt.Xact // shard -> gid -> xact
	procs   map[string]int64                   // live instance id -> started
	out     []indoubt.Command                  // reads and deliveries in flight
	steps   map[string]bool                    // every step issued so far
	decided map[string]indoubt.Alert           // alerts raised and not cleared, by the latest decision
	used    map[string]bool                    // every gid prepared so far: a gid is never reused, as PgDog's are not
	acked   map[string]bool                    // alert steps the sink acknowledged (and the monitor was told)
	rounds  int64                              // MonitorRound events seen, across driver restarts
	errs    []error
}

var allShards = []string{"s0", "s1", "s2"}

func newWorld(t machinetest.TB, c machinetest.Chooser) *world {
	return &world{t: t, c: c, m: indoubt.New(propOpts), now: 10_000, txns: map[string]map[string]indoubt.Xact{},
		procs: map[string]int64{"0": 1, "1": 1, "2": 1}, steps: map[string]bool{}, acked: map[string]bool{}, decided: map[string]indoubt.Alert{}}
}

func (w *world) violate(format string, a ...any) { w.errs = append(w.errs, fmt.Errorf(format, a...)) }

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
			if w.acked[c.Step] {
				w.violate("alert %s sent again at %s after the sink acknowledged it", c.ID, c.Step)
			}
			w.out = append(w.out, c)
			if w.steps[c.Step] {
				break // sent again until acknowledged: the same decision
			}
			w.steps[c.Step] = true
			w.checkAlert(c)
			if v := check.NoEarlyAlert(w.named(c), propOpts.Threshold.Milliseconds()); v != nil {
				w.violate("%v", v)
			}
			if prev, ok := w.decided[c.ID]; ok {
				prev.Step = c.Step
				if reflect.DeepEqual(prev, c) {
					w.violate("alert %s decided again unchanged", c.ID)
				}
			}
			w.decided[c.ID] = c
		case indoubt.ClearAlert:
			w.out = append(w.out, c)
			if w.steps[c.Step] {
				break
			}
			w.steps[c.Step] = true
			if _, ok := w.decided[c.ID]; !ok {
				w.violate("ClearAlert %s, which is not raised", c.ID)
			}
			delete(w.decided, c.ID)
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
		if err == nil {
			w.acked[c.Step] = true
		}
		return indoubt.Delivered{Step: c.Step, Err: err}
	case indoubt.ClearAlert:
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
			w.m = machinetest.RoundTrip(w.t, w.m, func(s indoubt.Snapshot) (*indoubt.Monitor, error) { return indoubt.Restore(s, propOpts) })
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
	if len(w.decided) > 0 {
		w.violate("alerts still raised after everything resolved: %v", slices.Sorted(maps.Keys(w.decided)))
	}
	if ob := w.m.Snapshot().Outbox; len(ob) > 0 {
		w.violate("deliveries still unacknowledged after every one was answered: %v", ob)
	}
	return errors.Join(w.errs...)
}
