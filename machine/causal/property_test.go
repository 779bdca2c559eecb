package causal_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"loam.dev/router/kernel/lsn"
	"loam.dev/router/machine"
	"loam.dev/router/machine/causal"
	"loam.dev/router/machine/machinetest"
)

// The properties of the issue, checked against an independent model over random runs:
//
//   - the requirement is monotone in the recorded timestamp (probe);
//   - selection never picks an endpoint below the requirement, and picks every one that
//     reached it; ordinary requests get every member whatever the LSN state;
//   - the requirement is fixed once, from the record at arrival, and equals the first
//     successful sample sent strictly after the execution in the full, unpruned log whenever
//     that sample is inside the window: pruning never removes the sample a request needs,
//     and a requirement the full log can answer is never left pending;
//   - a waiting request is routed as soon as an endpoint reaches it, and fails only at its
//     deadline with none there;
//   - retained samples stay within one per poll in the window plus an anchor per physical
//     endpoint, and a stuck peer keeps at most two for the whole window.

var (
	p1 = lsn.Endpoint{Host: "p1", Port: 5432}
	p2 = lsn.Endpoint{Host: "p2", Port: 5432}
	s1 = lsn.Endpoint{Host: "s1", Port: 5432}
	s2 = lsn.Endpoint{Host: "s2", Port: 5432}
	s3 = lsn.Endpoint{Host: "s3", Port: 5432} // stuck: replay paused for the whole run
)

var (
	groups    = map[int][]lsn.Endpoint{1: {p1, p2}, 2: {s1, s2, s3}, 3: {p1, s1}}
	endpoints = []lsn.Endpoint{p1, p2, s1, s2, s3}
	frontends = []string{"a", "b", "c"}
)

type op struct {
	Kind string
	DT   int64
	EP   int
	FE   int
	HG   int
	Step uint64
	Fail bool
	TO   int64
}

type run struct {
	Window int64
	Ops    []op
}

func genRun() *rapid.Generator[run] {
	return rapid.Custom(func(t *rapid.T) run {
		r := run{Window: rapid.Int64Range(30, 400).Draw(t, "window")}
		n := rapid.IntRange(20, 400).Draw(t, "ops")
		for range n {
			o := op{
				Kind: rapid.SampledFrom([]string{"sample", "sample", "sample", "sample", "execute", "causal", "acquire", "tick", "cancel", "probe", "disconnect"}).Draw(t, "kind"),
				DT:   rapid.Int64Range(0, 12).Draw(t, "dt"),
				EP:   rapid.IntRange(0, len(endpoints)-1).Draw(t, "ep"),
				FE:   rapid.IntRange(0, len(frontends)-1).Draw(t, "fe"),
				HG:   rapid.IntRange(2, 3).Draw(t, "hg"),
				Step: rapid.Uint64Range(0, 3).Draw(t, "step"),
				Fail: rapid.IntRange(0, 9).Draw(t, "fail") == 0,
				TO:   rapid.Int64Range(0, 150).Draw(t, "timeout"),
			}
			if o.Kind == "disconnect" && rapid.IntRange(0, 3).Draw(t, "rare") != 0 {
				o.Kind = "tick"
			}
			r.Ops = append(r.Ops, o)
		}
		return r
	})
}

// model is the independent reference: full logs, true positions, records and requests.
type model struct {
	window  int64
	log     map[lsn.Endpoint][]lsn.Sample
	pos     map[lsn.Endpoint]lsn.LSN
	records map[string]map[int]rec
	reqs    map[uint64]*mreq
	timers  machinetest.Timers
}

type rec struct {
	ep lsn.Endpoint
	at int64
}

type mreq struct {
	id       uint64
	fe       string
	hg       int
	src      rec
	has      bool // the frontend had a record for the source
	deadline int64
	causal   bool
	waiting  bool
}

func (m *model) latest(ep lsn.Endpoint) (lsn.Sample, bool) {
	l := m.log[ep]
	if len(l) == 0 {
		return lsn.Sample{}, false
	}
	return l[len(l)-1], true
}

func (m *model) reached(ep lsn.Endpoint, target lsn.LSN) bool {
	s, ok := m.latest(ep)
	return ok && s.Known && s.LSN >= target
}

// cutoff is the start of ep's window: pruning runs on the endpoint's own send times.
func (m *model) cutoff(ep lsn.Endpoint) int64 {
	l, _ := m.latest(ep)
	return l.Sent - m.window
}

// naive is the first successful sample of src sent strictly after the execution.
func (m *model) naive(r rec) (lsn.Sample, bool) {
	for _, s := range m.log[r.ep] {
		if s.Known && s.Sent > r.at {
			return s, true
		}
	}
	return lsn.Sample{}, false
}

func (m *model) eligible(r *mreq, target lsn.LSN) []lsn.Endpoint {
	var out []lsn.Endpoint
	for _, ep := range groups[r.hg] {
		if m.reached(ep, target) {
			out = append(out, ep)
		}
	}
	return out
}

// checkRun plays r against a machine built by mk and the model; it returns the first
// violation of a property.
func checkRun(r run, mk func(causal.Config) *causal.Machine) error {
	m := mk(causal.Config{Window: r.Window})
	recd := &machine.Recorder{}
	ctx := &machine.Ctx{Now: 1000, Rand: rand.New(rand.NewPCG(1, 2)), Trace: recd}
	md := &model{window: r.Window, log: map[lsn.Endpoint][]lsn.Sample{}, pos: map[lsn.Endpoint]lsn.LSN{},
		records: map[string]map[int]rec{}, reqs: map[uint64]*mreq{}, timers: machinetest.Timers{}}
	var nextID uint64
	var traceErr error
	feed := func(in causal.Input) ([]causal.Command, []machine.SpecEvent) {
		cmds := m.On(ctx, in)
		for _, c := range cmds {
			md.timers.Record(c)
		}
		evs := recd.Take()
		if err := checkTrace(ctx.Now, in, cmds, evs); err != nil && traceErr == nil {
			traceErr = err
		}
		return cmds, evs
	}
	for hg, eps := range groups {
		feed(causal.SetHostgroup{Hostgroup: hg, Endpoints: eps})
	}
	check := func(step int, cmds []causal.Command, events []machine.SpecEvent) error {
		fixed := map[uint64]machine.SpecEvent{}
		for _, ev := range events {
			if ev.Action == causal.ActRequire || ev.Action == causal.ActResolve {
				req, _ := ev.Get("req")
				fixed[uint64(req.Int())] = ev
			}
		}
		// Requirements: fixed from the record at arrival; exact inside the window; never
		// pending when the full log can answer.
		for id, ev := range fixed {
			q := md.reqs[id]
			if q == nil || !q.has {
				continue
			}
			want, ok := md.naive(q.src)
			state, _ := ev.Get("state")
			lv, _ := ev.Get("lsn")
			if ev.Action == causal.ActRequire && ok && state.Str() != "fixed" {
				return fmt.Errorf("step %d: request %d left pending though the full log has %v sent at %d after %d", step, id, want.LSN, want.Sent, q.src.at)
			}
			if lv.Str() == "" {
				continue
			}
			got := lsn.MustParse(lv.Str())
			if !ok {
				return fmt.Errorf("step %d: request %d fixed %v but no sample of %s was sent after %d", step, id, got, q.src.ep, q.src.at)
			}
			if want.Sent >= md.cutoff(q.src.ep) && got != want.LSN || got < want.LSN {
				return fmt.Errorf("step %d: request %d fixed %v, the first sample of %s after %d is %v (sent %d, now %d)", step, id, got, q.src.ep, q.src.at, want.LSN, want.Sent, ctx.Now)
			}
		}
		for _, c := range cmds {
			switch c := c.(type) {
			case causal.Route:
				q := md.reqs[c.ID]
				if q == nil {
					return fmt.Errorf("step %d: route for unknown request %d", step, c.ID)
				}
				delete(md.reqs, c.ID)
				var want []lsn.Endpoint
				if q.causal && q.has {
					if !c.Constrained {
						return fmt.Errorf("step %d: causal request %d with a record routed unconstrained", step, c.ID)
					}
					w, ok := md.naive(q.src)
					if !ok || c.Requirement < w.LSN {
						return fmt.Errorf("step %d: request %d routed with requirement %v below the first sample after %d", step, c.ID, c.Requirement, q.src.at)
					}
					want = md.eligible(q, c.Requirement)
				} else {
					if c.Constrained {
						return fmt.Errorf("step %d: request %d constrained without a record", step, c.ID)
					}
					want = groups[q.hg]
				}
				got := slices.Clone(c.Endpoints)
				slices.SortFunc(got, lsn.Endpoint.Compare)
				want = slices.Clone(want)
				slices.SortFunc(want, lsn.Endpoint.Compare)
				if !slices.Equal(got, want) {
					return fmt.Errorf("step %d: request %d routed to %v, endpoints that may serve it: %v", step, c.ID, got, want)
				}
			case causal.Fail:
				q := md.reqs[c.ID]
				delete(md.reqs, c.ID)
				if q == nil || errors.Is(c.Err, causal.ErrDisconnected) {
					continue
				}
				if !errors.Is(c.Err, causal.ErrNotReached) {
					return fmt.Errorf("step %d: request %d failed with %v", step, c.ID, c.Err)
				}
				if ctx.Now < q.deadline {
					return fmt.Errorf("step %d: request %d failed at %d before its deadline %d", step, c.ID, ctx.Now, q.deadline)
				}
			}
		}
		// Liveness: nothing waits that could be routed.
		for _, q := range md.reqs {
			if !q.waiting {
				continue
			}
			w, ok := md.naive(q.src)
			if ok && w.Sent >= md.cutoff(q.src.ep) && len(md.eligible(q, w.LSN)) > 0 {
				return fmt.Errorf("step %d: request %d still waits though %v reached %v", step, q.id, md.eligible(q, w.LSN), w.LSN)
			}
		}
		// Retention: per physical endpoint, at most the successful samples in the window plus
		// an anchor; a stuck peer at most two.
		bound := 0
		for _, ep := range endpoints {
			n := 0
			for _, s := range md.log[ep] {
				if s.Known && s.Sent >= md.cutoff(ep) {
					n++
				}
			}
			if len(md.log[ep]) > 0 {
				bound += n + 1
			}
		}
		if got := m.Retained(); got > bound {
			return fmt.Errorf("step %d: %d samples retained, bound %d", step, got, bound)
		}
		if h := m.History(s3); h != nil && h.Len() > 2 {
			return fmt.Errorf("step %d: the stuck peer holds %d samples", step, h.Len())
		}
		return nil
	}
	for i, o := range r.Ops {
		ctx.Now += o.DT
		var cmds []causal.Command
		var evs []machine.SpecEvent
		switch o.Kind {
		case "sample":
			ep := endpoints[o.EP]
			if l, ok := md.latest(ep); ok && l.Sent >= ctx.Now {
				continue
			}
			switch ep {
			case p1, p2:
				md.pos[ep] += lsn.LSN(o.Step)
			case s3:
			default:
				md.pos[ep] = min(md.pos[p1], md.pos[ep]+lsn.LSN(o.Step))
			}
			s := lsn.Observed(ctx.Now, md.pos[ep])
			if o.Fail {
				s = lsn.Unknown(ctx.Now)
			}
			md.log[ep] = append(md.log[ep], s)
			cmds, evs = feed(causal.Sampled{Endpoint: ep, Sample: s})
		case "execute":
			fe := frontends[o.FE]
			ep := groups[1][o.EP%2]
			if md.records[fe] == nil {
				md.records[fe] = map[int]rec{}
			}
			md.records[fe][1] = rec{ep, ctx.Now}
			cmds, evs = feed(causal.Executed{Frontend: fe, Hostgroup: 1, Endpoint: ep})
		case "causal", "probe":
			fes := []string{frontends[o.FE]}
			if o.Kind == "probe" {
				fes = frontends
			}
			for _, fe := range fes {
				nextID++
				rc, has := md.records[fe][1]
				q := &mreq{id: nextID, fe: fe, hg: o.HG, src: rc, has: has, deadline: ctx.Now + o.TO, causal: true, waiting: true}
				md.reqs[q.id] = q
				c, e := feed(causal.AcquireCausal{ID: q.id, Frontend: fe, Hostgroup: o.HG, From: 1, Deadline: q.deadline})
				cmds, evs = append(cmds, c...), append(evs, e...)
			}
			if o.Kind == "probe" {
				if err := checkMonotone(md, evs); err != nil {
					return fmt.Errorf("step %d: %w", i, err)
				}
			}
		case "acquire":
			nextID++
			md.reqs[nextID] = &mreq{id: nextID, fe: frontends[o.FE], hg: o.HG}
			cmds, evs = feed(causal.Acquire{ID: nextID, Frontend: frontends[o.FE], Hostgroup: o.HG})
		case "tick":
			for id, _, ok := md.timers.Pop(ctx.Now); ok; id, _, ok = md.timers.Pop(ctx.Now) {
				c, e := feed(causal.TimerFired{ID: id})
				cmds, evs = append(cmds, c...), append(evs, e...)
			}
		case "cancel":
			var ids []uint64
			for id, q := range md.reqs {
				if q.waiting {
					ids = append(ids, id)
				}
			}
			if len(ids) == 0 {
				continue
			}
			slices.Sort(ids)
			id := ids[o.EP%len(ids)]
			delete(md.reqs, id)
			cmds, evs = feed(causal.Cancel{ID: id})
		case "disconnect":
			fe := frontends[o.FE]
			delete(md.records, fe)
			cmds, evs = feed(causal.Disconnected{Frontend: fe})
		}
		if err := check(i, cmds, evs); err != nil {
			return err
		}
		if traceErr != nil {
			return fmt.Errorf("step %d: %w", i, traceErr)
		}
	}
	return nil
}

// checkMonotone: of the probe's requests (same moment, same source endpoint), a later
// recorded execution never gets a lower requirement, and never a fixed one when an earlier
// execution's is still pending.
func checkMonotone(md *model, evs []machine.SpecEvent) error {
	type fix struct {
		src   string
		after int64
		fixed bool
		l     lsn.LSN
	}
	var fixes []fix
	for _, ev := range evs {
		if ev.Action != causal.ActRequire {
			continue
		}
		st, _ := ev.Get("state")
		if st.Str() == "none" {
			continue
		}
		src, _ := ev.Get("src")
		after, _ := ev.Get("after")
		lv, _ := ev.Get("lsn")
		f := fix{src: src.Str(), after: after.Int(), fixed: st.Str() == "fixed"}
		if f.fixed {
			f.l = lsn.MustParse(lv.Str())
		}
		fixes = append(fixes, f)
	}
	for _, a := range fixes {
		for _, b := range fixes {
			if a.src != b.src || a.after > b.after {
				continue
			}
			if b.fixed && (!a.fixed || a.l > b.l) {
				return fmt.Errorf("requirement not monotone: execution at %d -> %+v, later execution at %d -> %+v", a.after, a, b.after, b)
			}
		}
	}
	return nil
}

func TestMachineProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		require.NoError(t, checkRun(genRun().Draw(t, "run"), causal.New))
	})
}

// TestMachineMutantsAreCaught: each mutant breaks one promise and checkRun says so within a
// bounded number of generated runs.
func TestMachineMutantsAreCaught(t *testing.T) {
	for name, mu := range map[string]causal.Mutant{
		"refix":              causal.MutantRefix,
		"ignore-requirement": causal.MutantIgnoreRequirement,
		"inclusive-after":    causal.MutantInclusiveAfter,
		"forget-down":        causal.MutantForgetDown,
		"no-wake":            causal.MutantNoWake,
		"per-hostgroup":      causal.MutantPerHostgroup,
		"aged-latest":        causal.MutantAgedLatest,
	} {
		t.Run(name, func(t *testing.T) {
			mk := func(c causal.Config) *causal.Machine { return causal.NewMutant(c, mu) }
			for seed := range 1000 {
				if err := checkRun(genRun().Example(seed), mk); err != nil {
					t.Logf("seed %d: %v", seed, err)
					return
				}
			}
			t.Fatalf("mutant %s survived 1000 runs", name)
		})
	}
}
