package causal

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"loam.dev/router/kernel/lsn"
	"loam.dev/router/machine"
)

// Spec is the name of the spec this machine's events belong to.
const Spec = "CausalRead"

// Actions of the CausalRead spec, one per kind of transition.
const (
	ActConfigure  = "Configure"  // a hostgroup's members were replaced
	ActObserve    = "Observe"    // a monitor sample was recorded
	ActRecord     = "Record"     // an execution replaced a frontend's record
	ActRequire    = "Require"    // a causal request fixed (or could not yet fix) its requirement
	ActResolve    = "Resolve"    // a pending requirement was fixed by a new sample
	ActRoute      = "Route"      // a request was routed
	ActWait       = "Wait"       // a causal request found no endpoint that reached it
	ActExpire     = "Expire"     // a waiting request's deadline passed
	ActAbandon    = "Abandon"    // a waiting request was cancelled or its frontend left
	ActDisconnect = "Disconnect" // a frontend's records were forgotten
)

// Actions lists every action in the order of the package doc.
var Actions = []string{ActConfigure, ActObserve, ActRecord, ActRequire, ActResolve, ActRoute, ActWait, ActExpire, ActAbandon, ActDisconnect}

// Config configures a Machine.
type Config struct {
	// Window is the LSN history window in milliseconds (pgsql-monitor_lsn_history); 0 means
	// lsn.DefaultWindow.
	Window int64
	// Mutants break the machine on purpose, for the simulator's checkers to show they catch
	// it (detsim's causal scenario); never set them outside tests.
	Mutants Mutants
}

// Mutants are deliberate bugs of the machine, each tripping a named invariant in a test.
type Mutants struct {
	// IgnoreRequirement routes a causal request to every member, reached or not.
	IgnoreRequirement bool
	// NoWake never wakes a waiting request on a sample: it waits to its deadline.
	NoWake bool
}

type record struct {
	ep lsn.Endpoint
	at int64
}

type request struct {
	id       uint64
	frontend string
	hg, from int
	deadline int64
	arrived  int64
	src      record
	resolved bool
	req      lsn.LSN
}

// mutant names a deliberately wrong variant of the machine, used only by tests to show the
// property checks can fail (see export_test.go).
type mutant uint8

const (
	mutantNone              mutant = iota
	mutantRefix                    // a waiting request re-reads the frontend's record on every wake
	mutantIgnoreRequirement        // causal routes are not filtered
	mutantInclusiveAfter           // a sample sent at the completion time itself counts
	mutantForgetDown               // an endpoint's history is dropped when a poll fails
	mutantNoWake                   // samples do not wake waiting requests
	mutantPerHostgroup             // retention copied per hostgroup membership
	mutantAgedLatest               // an execution older than the retained history uses the newest sample
)

// Machine is the causal-read state of one proxy or application: records of every frontend,
// LSN histories of every endpoint, memberships of every hostgroup, and waiting requests.
type Machine struct {
	hist     *lsn.Histories
	groups   map[int][]lsn.Endpoint
	fronts   map[string]map[int]record
	waiting  []*request // in arrival order
	rejected int
	mutant   mutant
	copies   map[copyKey]*lsn.History // mutantPerHostgroup only
}

type copyKey struct {
	hg int
	ep lsn.Endpoint
}

// New returns an empty machine.
func New(cfg Config) *Machine {
	return &Machine{
		hist:   lsn.NewHistories(cfg.Window),
		groups: map[int][]lsn.Endpoint{},
		fronts: map[string]map[int]record{},
		mutant: cfg.Mutants.mutant(),
	}
}

func (ms Mutants) mutant() mutant {
	switch {
	case ms.IgnoreRequirement:
		return mutantIgnoreRequirement
	case ms.NoWake:
		return mutantNoWake
	}
	return mutantNone
}

// On consumes one input and returns the commands to execute, in order.
func (m *Machine) On(ctx *machine.Ctx, in Input) []Command {
	switch in := in.(type) {
	case SetHostgroup:
		return m.setHostgroup(ctx, in)
	case Sampled:
		return m.sampled(ctx, in)
	case Executed:
		m.executed(ctx, in)
		return nil
	case Acquire:
		return m.acquire(ctx, in)
	case AcquireCausal:
		return m.acquireCausal(ctx, in)
	case Cancel:
		return m.cancel(ctx, in.ID)
	case Disconnected:
		return m.disconnected(ctx, in.Frontend)
	case TimerFired:
		return m.timerFired(ctx, in.ID)
	}
	panic(fmt.Sprintf("causal: unknown input %T", in))
}

func (m *Machine) setHostgroup(ctx *machine.Ctx, in SetHostgroup) []Command {
	var eps []lsn.Endpoint
	for _, ep := range in.Endpoints {
		if !slices.Contains(eps, ep) {
			eps = append(eps, ep)
		}
	}
	if len(eps) == 0 {
		delete(m.groups, in.Hostgroup)
	} else {
		m.groups[in.Hostgroup] = eps
	}
	if ctx.Trace != nil {
		ctx.Emit(Spec, ActConfigure, machine.I("hg", int64(in.Hostgroup)), machine.I("members", int64(len(eps))))
	}
	return m.wake(ctx, func(r *request) bool { return r.hg == in.Hostgroup })
}

func (m *Machine) sampled(ctx *machine.Ctx, in Sampled) []Command {
	if err := m.hist.Record(in.Endpoint, in.Sample); err != nil {
		m.rejected++
		return nil
	}
	if m.mutant == mutantPerHostgroup {
		m.copyPerHostgroup(in)
	}
	if m.mutant == mutantForgetDown && !in.Sample.Known {
		m.hist.Forget(in.Endpoint)
	}
	s := in.Sample
	if ctx.Trace != nil {
		ctx.Emit(Spec, ActObserve, machine.S("ep", in.Endpoint.String()), machine.I("sent", s.Sent),
			machine.B("known", s.Known), machine.S("lsn", lsnField(s.LSN, s.Known)))
	}
	if m.mutant == mutantNoWake {
		return nil
	}
	return m.wake(ctx, func(r *request) bool {
		return !r.resolved && r.src.ep == in.Endpoint || r.resolved && slices.Contains(m.groups[r.hg], in.Endpoint)
	})
}

func (m *Machine) executed(ctx *machine.Ctx, in Executed) {
	recs := m.fronts[in.Frontend]
	if recs == nil {
		recs = map[int]record{}
		m.fronts[in.Frontend] = recs
	}
	recs[in.Hostgroup] = record{ep: in.Endpoint, at: ctx.Now}
	if ctx.Trace != nil {
		ctx.Emit(Spec, ActRecord, machine.S("frontend", in.Frontend), machine.I("hg", int64(in.Hostgroup)),
			machine.S("ep", in.Endpoint.String()), machine.I("at", ctx.Now))
	}
}

func (m *Machine) acquire(ctx *machine.Ctx, in Acquire) []Command {
	members := m.groups[in.Hostgroup]
	if len(members) == 0 {
		return []Command{Fail{ID: in.ID, Err: noEndpoints(in.Hostgroup)}}
	}
	eps := shuffled(ctx, members)
	if ctx.Trace != nil {
		ctx.Emit(Spec, ActRoute, machine.U("req", in.ID), machine.I("hg", int64(in.Hostgroup)), machine.B("causal", false),
			machine.S("ep", eps[0].String()), machine.I("eligible", int64(len(eps))), machine.S("lsn", ""))
	}
	return []Command{Route{ID: in.ID, Endpoints: eps}}
}

func (m *Machine) acquireCausal(ctx *machine.Ctx, in AcquireCausal) []Command {
	if m.find(in.ID) >= 0 {
		return []Command{Fail{ID: in.ID, Err: fmt.Errorf("%w: request %d", ErrDuplicateRequest, in.ID)}}
	}
	members := m.groups[in.Hostgroup]
	if len(members) == 0 {
		return []Command{Fail{ID: in.ID, Err: noEndpoints(in.Hostgroup)}}
	}
	rec, ok := m.fronts[in.Frontend][in.From]
	if !ok {
		if ctx.Trace != nil {
			ctx.Emit(Spec, ActRequire, machine.U("req", in.ID), machine.S("frontend", in.Frontend), machine.I("from", int64(in.From)),
				machine.S("state", "none"), machine.S("src", ""), machine.I("after", 0), machine.S("lsn", ""))
		}
		eps := shuffled(ctx, members)
		if ctx.Trace != nil {
			ctx.Emit(Spec, ActRoute, machine.U("req", in.ID), machine.I("hg", int64(in.Hostgroup)), machine.B("causal", true),
				machine.S("ep", eps[0].String()), machine.I("eligible", int64(len(eps))), machine.S("lsn", ""))
		}
		return []Command{Route{ID: in.ID, Endpoints: eps, Causal: true}}
	}
	r := request{id: in.ID, frontend: in.Frontend, hg: in.Hostgroup, from: in.From, deadline: in.Deadline, arrived: ctx.Now, src: rec}
	state := "pending"
	if s, ok := m.after(rec); ok {
		r.resolved, r.req, state = true, s.LSN, "fixed"
	}
	if ctx.Trace != nil {
		ctx.Emit(Spec, ActRequire, machine.U("req", in.ID), machine.S("frontend", in.Frontend), machine.I("from", int64(in.From)),
			machine.S("state", state), machine.S("src", rec.ep.String()), machine.I("after", rec.at), machine.S("lsn", lsnField(r.req, r.resolved)))
	}
	if cmds, ok := m.tryRoute(ctx, &r); ok {
		return cmds
	}
	if in.Deadline <= ctx.Now {
		return []Command{m.expire(ctx, &r)}
	}
	waiting := r // only a waiting request is kept (and allocated)
	m.waiting = append(m.waiting, &waiting)
	if ctx.Trace != nil {
		ctx.Emit(Spec, ActWait, machine.U("req", in.ID), machine.I("hg", int64(in.Hostgroup)),
			machine.S("lsn", lsnField(r.req, r.resolved)), machine.I("deadline", in.Deadline))
	}
	return []Command{SetTimer{machine.SetTimer{ID: timerID(in.ID), At: in.Deadline}}}
}

// after is the requirement lookup: the first retained successful sample of the recorded
// source endpoint sent strictly after the recorded completion time.
func (m *Machine) after(rec record) (lsn.Sample, bool) {
	t := rec.at
	if m.mutant == mutantInclusiveAfter {
		t--
	}
	if h := m.hist.Get(rec.ep); m.mutant == mutantAgedLatest && h != nil {
		latest, _ := h.Latest()
		if oldest, ok := h.After(math.MinInt64); ok && oldest.Sent > t && oldest.Sent < latest.Sent-h.Window() && h.Len() > 1 {
			all := h.Samples()
			return all[len(all)-1], true
		}
	}
	return m.hist.After(rec.ep, t)
}

// tryRoute routes r if its requirement is fixed and some member has reached it.
func (m *Machine) tryRoute(ctx *machine.Ctx, r *request) ([]Command, bool) {
	if !r.resolved {
		return nil, false
	}
	var eligible []lsn.Endpoint
	for _, ep := range m.groups[r.hg] {
		if m.mutant == mutantIgnoreRequirement || m.hist.Reached(ep, r.req) {
			eligible = append(eligible, ep)
		}
	}
	if len(eligible) == 0 {
		return nil, false
	}
	shuffle(ctx, eligible)
	eps := eligible
	if ctx.Trace != nil {
		ctx.Emit(Spec, ActRoute, machine.U("req", r.id), machine.I("hg", int64(r.hg)), machine.B("causal", true),
			machine.S("ep", eps[0].String()), machine.I("eligible", int64(len(eps))), machine.S("lsn", r.req.String()))
	}
	return []Command{Route{ID: r.id, Endpoints: eps, Causal: true, Constrained: true, Requirement: r.req}}, true
}

// wake re-examines the waiting requests selected by pick, in arrival order.
func (m *Machine) wake(ctx *machine.Ctx, pick func(*request) bool) []Command {
	var out []Command
	kept := m.waiting[:0]
	for _, r := range m.waiting {
		if !pick(r) {
			kept = append(kept, r)
			continue
		}
		if m.mutant == mutantRefix {
			r.src, r.resolved = m.fronts[r.frontend][r.from], false
		}
		if !r.resolved {
			if s, ok := m.after(r.src); ok {
				r.resolved, r.req = true, s.LSN
				if ctx.Trace != nil {
					ctx.Emit(Spec, ActResolve, machine.U("req", r.id), machine.S("src", r.src.ep.String()),
						machine.I("sent", s.Sent), machine.S("lsn", s.LSN.String()))
				}
			}
		}
		if cmds, ok := m.tryRoute(ctx, r); ok {
			out = append(out, CancelTimer{machine.CancelTimer{ID: timerID(r.id)}})
			out = append(out, cmds...)
			continue
		}
		kept = append(kept, r)
	}
	clear(m.waiting[len(kept):])
	m.waiting = kept
	return out
}

func (m *Machine) timerFired(ctx *machine.Ctx, id string) []Command {
	n, ok := parseTimerID(id)
	if !ok {
		return nil
	}
	i := m.find(n)
	if i < 0 {
		return nil // raced a route or a cancel
	}
	r := m.waiting[i]
	m.waiting = slices.Delete(m.waiting, i, i+1)
	return []Command{m.expire(ctx, r)}
}

func (m *Machine) expire(ctx *machine.Ctx, r *request) Command {
	if ctx.Trace != nil {
		ctx.Emit(Spec, ActExpire, machine.U("req", r.id), machine.I("hg", int64(r.hg)), machine.B("resolved", r.resolved),
			machine.S("lsn", lsnField(r.req, r.resolved)))
	}
	return Fail{ID: r.id, Err: &WaitError{Hostgroup: r.hg, From: r.from, Source: r.src.ep, Completed: r.src.at,
		Resolved: r.resolved, Requirement: r.req, Waited: ctx.Now - r.arrived}}
}

func (m *Machine) cancel(ctx *machine.Ctx, id uint64) []Command {
	i := m.find(id)
	if i < 0 {
		return nil
	}
	m.waiting = slices.Delete(m.waiting, i, i+1)
	if ctx.Trace != nil {
		ctx.Emit(Spec, ActAbandon, machine.U("req", id), machine.S("why", "cancelled"))
	}
	return []Command{CancelTimer{machine.CancelTimer{ID: timerID(id)}}}
}

func (m *Machine) disconnected(ctx *machine.Ctx, frontend string) []Command {
	var out []Command
	m.waiting = slices.DeleteFunc(m.waiting, func(r *request) bool {
		if r.frontend != frontend {
			return false
		}
		if ctx.Trace != nil {
			ctx.Emit(Spec, ActAbandon, machine.U("req", r.id), machine.S("why", "disconnected"))
		}
		out = append(out, CancelTimer{machine.CancelTimer{ID: timerID(r.id)}},
			Fail{ID: r.id, Err: fmt.Errorf("%w: %q (request %d)", ErrDisconnected, frontend, r.id)})
		return true
	})
	delete(m.fronts, frontend)
	if ctx.Trace != nil {
		ctx.Emit(Spec, ActDisconnect, machine.S("frontend", frontend))
	}
	return out
}

func (m *Machine) find(id uint64) int {
	return slices.IndexFunc(m.waiting, func(r *request) bool { return r.id == id })
}

func noEndpoints(hg int) error {
	return fmt.Errorf("%w: hostgroup %d (configure its members with SetHostgroup)", ErrNoEndpoints, hg)
}

// shuffled returns a copy of eps in random order (ctx.Rand), or in configured order when the
// context has no generator.
func shuffled(ctx *machine.Ctx, eps []lsn.Endpoint) []lsn.Endpoint {
	out := slices.Clone(eps)
	shuffle(ctx, out)
	return out
}

func shuffle(ctx *machine.Ctx, eps []lsn.Endpoint) {
	if ctx.Rand != nil {
		ctx.Rand.Shuffle(len(eps), func(i, j int) { eps[i], eps[j] = eps[j], eps[i] })
	}
}

func lsnField(l lsn.LSN, known bool) string {
	if !known {
		return ""
	}
	return l.String()
}

const timerPrefix = "causal/"

func timerID(id uint64) string { return timerPrefix + strconv.FormatUint(id, 10) }

func parseTimerID(s string) (uint64, bool) {
	rest, ok := strings.CutPrefix(s, timerPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(rest, 10, 64)
	return n, err == nil
}

func (m *Machine) copyPerHostgroup(in Sampled) {
	if m.copies == nil {
		m.copies = map[copyKey]*lsn.History{}
	}
	for hg, eps := range m.groups {
		if slices.Contains(eps, in.Endpoint) {
			k := copyKey{hg, in.Endpoint}
			if m.copies[k] == nil {
				m.copies[k] = lsn.NewHistory(m.hist.Window())
			}
			_ = m.copies[k].Record(in.Sample)
		}
	}
}
