package spec

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/lsn"
	"loam.dev/router/machine"
	"loam.dev/router/machine/causal"
)

// TestModelReplayCausalRead is issue 18's model-based test for the CausalRead model: runs
// its simulator generates are replayed on machine/causal. The replay configures the source
// hostgroup (the primary p) and the destination (the replicas), then feeds each model step
// as the machine's input: a session's write completing on p (Executed, at the model's tick:
// a tick is a second of the machine's clock), the monitor's sample of an endpoint (Sampled,
// with the position and the send time of the poll the model sent), a causal read with its
// deadline (AcquireCausal), the deadline passing (the request's timer), a cancel, a
// disconnect, the destination's members changing (SetHostgroup). The world's steps (the
// primary's writes, the replicas' replay, the polls going out, the clock) reach the machine
// only through those. After each step the machine must have emitted the model's actions
// (in the model's order, but for the requests one sample or one SetHostgroup wakes: the
// model wakes them by session, the machine by arrival), have waiting exactly the requests
// the model has waiting, with the requirement fixed or pending as the model's, and every
// endpoint it routes a causal read to must have replayed the session's last write before
// the read arrived (the model's Inv_ReadYourWrites, checked on the machine's routes).
//
// SPEC_REPLAY_RUNS (default 30) sets how many runs. The same runs replayed on the machine
// with its IgnoreRequirement mutant on must fail.
func TestModelReplayCausalRead(t *testing.T) {
	runs := modelRuns[crState](t, "CausalRead.qnt", "CausalReadMC", replayRuns(t, 30), 40, "--step=replayStep")
	steps, routed := 0, 0
	for _, r := range runs {
		n, err := replayCausal(r, causal.Mutants{})
		require.NoError(t, err)
		steps += len(r.States) - 1
		routed += n
	}
	t.Logf("%d model runs (%d steps) replayed on machine/causal; %d constrained routes checked", len(runs), steps, routed)
	require.Greater(t, routed, 0, "no replayed run routed a read after a write")
	err := firstReplayError(runs, func(r modelRun[crState]) error {
		_, err := replayCausal(r, causal.Mutants{IgnoreRequirement: true})
		return err
	})
	var re *replayError
	require.ErrorAs(t, err, &re, "machine/causal with IgnoreRequirement replayed every model run: the replay does not check the requirement")
	t.Logf("IgnoreRequirement: %s", firstLine(err))
}

type crSample struct {
	Sent, Lsn int
	Known     bool
}

type crModel struct {
	Now, Wal  int
	Replay    map[string]int
	Poll      map[string]crSample
	Members   []string
	Req       map[string]struct{ Waiting, Resolved bool }
	LastWrite map[string]int
	Emitted   []string
}

type crState struct {
	Action string
	Picks  map[string]any
	S      crModel
}

const (
	crSource, crDest = 10, 20
	crTick           = 1000    // one model tick on the machine's clock (ms)
	crBase           = 1 << 24 // the model's position 0 as an LSN
)

var crEndpoints = map[string]lsn.Endpoint{"p": {Host: "10.0.0.1", Port: 5432}, "r1": {Host: "10.0.0.2", Port: 5432}, "r2": {Host: "10.0.0.3", Port: 5432}}

func crName(ep lsn.Endpoint) string {
	for n, e := range crEndpoints {
		if e == ep {
			return n
		}
	}
	return ep.String()
}

func crGroup(names []string) causal.SetHostgroup {
	in := causal.SetHostgroup{Hostgroup: crDest}
	for _, n := range slices.Sorted(slices.Values(names)) {
		in.Endpoints = append(in.Endpoints, crEndpoints[n])
	}
	return in
}

// replayCausal feeds one model run to a fresh machine (with mu on) and returns the number
// of constrained routes it checked and the first step where the machine does not do what
// the model did.
func replayCausal(run modelRun[crState], mu causal.Mutants) (routes int, err error) {
	states := run.States
	m := causal.New(causal.Config{Window: 3600 * crTick, Mutants: mu})
	rp := newReplayer(run.Name, func(i int) string { return states[i].Action })
	tr, rng, fail := rp.tr, rp.rng, rp.fail
	defer recoverReplay(&err)
	now := int64(crTick)
	// Each session's waiting request (0: none), the session's last write when it arrived,
	// and the requests' ids.
	waiting := map[string]uint64{}
	need := map[uint64]int{}
	session := map[uint64]string{}
	next := uint64(1)
	timer := map[uint64]string{}
	var s crModel
	feed := func(in causal.Input) {
		for _, c := range m.On(&machine.Ctx{Now: now, Rand: rng, Trace: tr}, in) {
			rp.log = append(rp.log, fmt.Sprintf("      cmd %T%+v", c, c))
			switch c := c.(type) {
			case causal.Route:
				f := session[c.ID]
				delete(waiting, f)
				if !c.Constrained {
					continue
				}
				routes++
				for _, ep := range c.Endpoints {
					n := crName(ep)
					pos := s.Wal
					if n != "p" {
						pos = s.Replay[n]
					}
					if pos < need[c.ID] {
						fail("the machine routes %s's read to %s at position %d, behind the session's write at %d", f, n, pos, need[c.ID])
					}
				}
			case causal.Fail:
				delete(waiting, session[c.ID])
			case causal.SetTimer: // a waiting request's deadline (the one just acquired)
				timer[next-1] = c.ID
			}
		}
	}
	feed(causal.SetHostgroup{Hostgroup: crSource, Endpoints: []lsn.Endpoint{crEndpoints["p"]}})
	feed(crGroup([]string{"r1", "r2"}))
	tr.Take()
	for i := 1; i < len(states); i++ {
		rp.step = i
		p := states[i-1].S
		s = states[i].S
		act, picks := states[i].Action, states[i].Picks
		f, _ := picks["f"].(string)
		now = int64(s.Now) * crTick
		rp.log = append(rp.log, fmt.Sprintf("  %d %s %v -> model now=%d wal=%d replay=%v req=%v emitted=%v", i, act, picks, s.Now, s.Wal, s.Replay, s.Req, s.Emitted))
		switch act {
		case "Write":
			feed(causal.Executed{Frontend: f, Hostgroup: crSource, Endpoint: crEndpoints["p"]})
		case "Replicate", "Tick", "PollSend":
		case "Observe":
			ep, _ := picks["ep"].(string)
			x := p.Poll[ep]
			feed(causal.Sampled{Endpoint: crEndpoints[ep], Sample: lsn.Sample{Sent: int64(x.Sent) * crTick, LSN: lsn.LSN(crBase + x.Lsn), Known: x.Known}})
		case "Acquire":
			wait, _ := picks["wait"].(int)
			id := next
			next++
			session[id], need[id], waiting[f] = f, p.LastWrite[f], id
			feed(causal.AcquireCausal{ID: id, Frontend: f, Hostgroup: crDest, From: crSource, Deadline: now + int64(wait)*crTick})
		case "Expire":
			id, ok := timer[waiting[f]]
			if !ok {
				fail("the model's request of %s expires, the machine set it no deadline", f)
			}
			feed(causal.TimerFired{ID: id})
		case "Cancel":
			id := waiting[f]
			delete(waiting, f)
			feed(causal.Cancel{ID: id})
		case "Disconnect":
			feed(causal.Disconnected{Frontend: f})
		case "Configure":
			ms, _ := picks["m"].([]any)
			var names []string
			for _, n := range ms {
				names = append(names, fmt.Sprint(n))
			}
			feed(crGroup(names))
		default:
			fail("unknown model action %q", act)
		}
		var acts []string
		var states []string
		for _, e := range tr.Take() {
			acts = append(acts, e.Action)
			if e.Action == causal.ActRequire {
				for _, fl := range e.Fields {
					if fl.Key == "state" {
						states = append(states, fl.Value.Str())
					}
				}
			}
		}
		want := s.Emitted
		if act == "Observe" || act == "Configure" { // the woken requests: by session in the model, by arrival in the machine
			acts, want = slices.Sorted(slices.Values(acts)), slices.Sorted(slices.Values(want))
		}
		if !slices.Equal(acts, want) && len(acts)+len(want) > 0 {
			fail("the machine emitted %v, the model %v", acts, s.Emitted)
		}
		for _, g := range []string{"f1", "f2"} {
			if _, ok := waiting[g]; ok != s.Req[g].Waiting {
				fail("session %s: the machine has a request waiting: %v, the model %v", g, ok, s.Req[g].Waiting)
			}
		}
		if act == "Acquire" && s.Req[f].Waiting && slices.Contains(states, "fixed") != s.Req[f].Resolved {
			fail("session %s's requirement: the machine %v, the model resolved=%v", f, states, s.Req[f].Resolved)
		}
	}
	return routes, nil
}
