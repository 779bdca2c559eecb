package indoubt_test

import (
	"errors"

	"loam.dev/router/machine"
	"loam.dev/router/machine/indoubt"
)

// fixture drives one monitor of one shard, "s0", through whole rounds in which every read
// and every delivery answers at once: the deterministic counterpart of the world, for
// tests that need an alert decided at a given instant.
type fixture struct {
	m      *indoubt.Monitor
	now    int64
	timer  int64
	alerts []indoubt.Alert          // every alert decision, in order
	raised map[string]indoubt.Alert // raised and not cleared
	// rosterErr, when set, fails every roster read (the orchestrator's API down).
	rosterErr error
}

func newFixture(opts indoubt.Options, now int64) *fixture {
	return &fixture{m: indoubt.New(opts), now: now, raised: map[string]indoubt.Alert{}}
}

// round starts the next round (the first one with Track) at the round timer, or now if
// later, and answers its reads: the shard holds xacts (or its scan fails) and the roster
// lists procs.
func (f *fixture) round(xacts []indoubt.Xact, procs []indoubt.Process, fail bool) {
	var pending []indoubt.Command
	feed := func(in indoubt.Input) {
		for _, c := range f.m.On(&machine.Ctx{Now: f.now}, in) {
			switch c := c.(type) {
			case indoubt.SetTimer:
				f.timer = c.At
			case indoubt.Alert:
				f.alerts = append(f.alerts, c)
				f.raised[c.ID] = c
				pending = append(pending, c)
			case indoubt.ClearAlert:
				delete(f.raised, c.ID)
				pending = append(pending, c)
			default:
				pending = append(pending, c)
			}
		}
	}
	if f.timer == 0 {
		feed(indoubt.Track{Shards: []string{"s0"}})
	} else {
		f.now = max(f.now, f.timer)
		feed(indoubt.TimerFired{ID: indoubt.RoundTimer})
	}
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		switch c := c.(type) {
		case indoubt.ListPrepared:
			p := indoubt.Prepared{Step: c.Step, Shard: c.Shard, Xacts: xacts}
			if fail {
				p.Xacts, p.Err = nil, errors.New("unreachable")
			}
			feed(p)
		case indoubt.ListInstances:
			if f.rosterErr != nil {
				feed(indoubt.Roster{Step: c.Step, Err: f.rosterErr})
				break
			}
			feed(indoubt.Roster{Step: c.Step, Processes: procs})
		case indoubt.Alert:
			feed(indoubt.Delivered{Step: c.Step})
		case indoubt.ClearAlert:
			feed(indoubt.Delivered{Step: c.Step})
		}
	}
}

// reasons is the raised alerts' reasons, by id.
func (f *fixture) reasons() map[string]indoubt.Reason {
	out := map[string]indoubt.Reason{}
	for id, a := range f.raised {
		out[id] = a.Reason
	}
	return out
}
