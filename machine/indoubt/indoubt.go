package indoubt

import (
	"cmp"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"loam.dev/router/machine"
)

// Monitor watches one database's shards for prepared transactions left in doubt. It is a
// plain value: no clients, no clock, no goroutines. Make one with New or Restore.
type Monitor struct {
	opts Options
	s    Snapshot
	out  []Command
}

// New returns a monitor that starts scanning at the first Track.
func New(opts Options) *Monitor { return &Monitor{opts: opts.withDefaults()} }

// RoundTimer is the id of the one timer the monitor sets.
const RoundTimer = "round"

// On consumes one input and returns the commands to execute. It never blocks and never
// does I/O.
func (m *Monitor) On(ctx *machine.Ctx, in Input) []Command {
	m.out = nil
	switch in := in.(type) {
	case Track:
		m.track(ctx, in)
	case Prepared:
		m.prepared(ctx, in)
	case Roster:
		m.roster(ctx, in)
	case Delivered:
		m.delivered(ctx, in)
	case TimerFired:
		if in.ID == RoundTimer && m.s.Next != 0 && ctx.Now >= m.s.Next {
			m.closeRound(ctx)
			m.openRound(ctx)
		}
	case Restarted:
		m.restarted(ctx)
	}
	out := m.mutate(ctx, m.out)
	m.out = nil
	return out
}

func (m *Monitor) emit(c Command) { m.out = append(m.out, c) }

func ms(d time.Duration) int64 { return d.Milliseconds() }

func (m *Monitor) roundPrefix() string { return "r" + strconv.FormatUint(m.s.Round, 10) + "/" }

func (m *Monitor) findShard(name string) (*Shard, bool) {
	i, ok := slices.BinarySearchFunc(m.s.Shards, name, func(s Shard, n string) int { return strings.Compare(s.Name, n) })
	if !ok {
		return nil, false
	}
	return &m.s.Shards[i], true
}

// --- Inputs -------------------------------------------------------------------------------

func (m *Monitor) track(ctx *machine.Ctx, t Track) {
	names := slices.Clone(t.Shards)
	slices.Sort(names)
	names = slices.Compact(names)
	names = slices.DeleteFunc(names, func(n string) bool { return n == "" })
	shards := make([]Shard, len(names))
	for i, n := range names {
		if old, ok := m.findShard(n); ok {
			shards[i] = *old
		} else {
			shards[i] = Shard{Name: n}
		}
	}
	m.s.Shards = shards
	ctx.Emit(Spec, ActTrack, machine.I("shards", int64(len(shards))))
	switch {
	case m.s.Next == 0:
		m.openRound(ctx)
	case m.s.Open && m.allIn():
		m.closeRound(ctx)
	}
}

func (m *Monitor) prepared(ctx *machine.Ctx, r Prepared) {
	sh, ok := m.findShard(r.Shard)
	if !ok || !m.s.Open || !sh.Awaiting || r.Step != m.roundPrefix()+"prepared/"+r.Shard {
		return // a reply to an older round, or for a shard no longer tracked
	}
	sh.Awaiting = false
	fs := []machine.Field{machine.U("round", m.s.Round), machine.S("shard", sh.Name), machine.B("ok", r.Err == nil)}
	if r.Err != nil {
		sh.Failures++
		sh.Err = r.Err.Error()
		ctx.Emit(Spec, ActScan, append(fs, machine.S("err", sh.Err))...)
	} else {
		sh.Xacts = seen(sh.Xacts, r.Xacts, ctx.Now)
		sh.Scanned, sh.Failures, sh.Err = true, 0, ""
		ctx.Emit(Spec, ActScan, append(fs, machine.I("prepared", int64(len(sh.Xacts))), machine.S("xacts", xactsField(sh.Xacts)))...)
	}
	if m.allIn() {
		m.closeRound(ctx)
	}
}

// xactsField is a scan's transactions for its SpecEvent, "gid@origin,...": each gid and the
// time the monitor ages it from (its prepare time, or its first scan when the shard does not
// say). Trace validation (spec/crossshard_trace_test.go) reads each transaction's branches
// and ages from it.
func xactsField(xs []Seen) string {
	var b strings.Builder
	for i, x := range xs {
		if i > 0 {
			b.WriteByte(',')
		}
		origin := x.Prepared
		if origin == 0 {
			origin = x.FirstSeen
		}
		b.WriteString(x.GID + "@" + strconv.FormatInt(origin, 10))
	}
	return b.String()
}

// procsField is a roster for its SpecEvent, "id@started,...".
func procsField(ps []Process) string {
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(p.ID + "@" + strconv.FormatInt(p.Started, 10))
	}
	return b.String()
}

// gidsField is an alert's branches for its SpecEvent, "gid,...", in the alert's order.
func gidsField(txns []Txn) string {
	var gids []string
	for _, t := range txns {
		for _, p := range t.Parts {
			gids = append(gids, p.GID)
		}
	}
	return strings.Join(gids, ",")
}

// seen returns the scanned transactions sorted by gid, keeping when each was first seen.
func seen(before []Seen, xs []Xact, now int64) []Seen {
	out := make([]Seen, 0, len(xs))
	for _, x := range xs {
		first := now
		if i, ok := slices.BinarySearchFunc(before, x.GID, func(s Seen, g string) int { return strings.Compare(s.GID, g) }); ok {
			first = before[i].FirstSeen
		}
		out = append(out, Seen{Xact: x, FirstSeen: first})
	}
	slices.SortFunc(out, func(a, b Seen) int { return strings.Compare(a.GID, b.GID) })
	return slices.CompactFunc(out, func(a, b Seen) bool { return a.GID == b.GID })
}

func (m *Monitor) roster(ctx *machine.Ctx, r Roster) {
	ro := &m.s.Roster
	if !m.s.Open || !ro.Awaiting || r.Step != m.roundPrefix()+"roster" {
		return
	}
	ro.Awaiting = false
	fs := []machine.Field{machine.U("round", m.s.Round), machine.B("ok", r.Err == nil)}
	if r.Err != nil {
		ctx.Emit(Spec, ActRoster, append(fs, machine.S("err", r.Err.Error()))...)
	} else {
		ps := slices.Clone(r.Processes)
		slices.SortFunc(ps, func(a, b Process) int { return strings.Compare(a.ID, b.ID) })
		ro.Processes = slices.CompactFunc(ps, func(a, b Process) bool { return a.ID == b.ID })
		ro.Fresh = true
		ctx.Emit(Spec, ActRoster, append(fs, machine.I("instances", int64(len(ro.Processes))), machine.S("procs", procsField(ro.Processes)))...)
	}
	if m.allIn() {
		m.closeRound(ctx)
	}
}

func (m *Monitor) restarted(ctx *machine.Ctx) {
	ctx.Emit(Spec, ActRestart, machine.U("round", m.s.Round))
	if m.s.Next == 0 {
		return // never tracked anything: wait for Track
	}
	// The open round's replies went with the old driver: abandon it without counting
	// them as failures (a restart is not a shard that cannot be read), and start anew.
	for i := range m.s.Shards {
		m.s.Shards[i].Awaiting = false
	}
	m.s.Roster.Awaiting = false
	m.s.Open = false
	m.sendOutbox()
	m.openRound(ctx)
}

// --- Rounds -------------------------------------------------------------------------------

func (m *Monitor) allIn() bool {
	if m.s.Roster.Awaiting {
		return false
	}
	for _, sh := range m.s.Shards {
		if sh.Awaiting {
			return false
		}
	}
	return true
}

func (m *Monitor) openRound(ctx *machine.Ctx) {
	m.s.Round++
	m.s.Open = true
	p := m.roundPrefix()
	ctx.Emit(Spec, ActRound, machine.U("round", m.s.Round), machine.I("shards", int64(len(m.s.Shards))))
	for i := range m.s.Shards {
		sh := &m.s.Shards[i]
		sh.Awaiting = true
		m.emit(ListPrepared{Step: p + "prepared/" + sh.Name, Shard: sh.Name})
	}
	m.s.Roster.Awaiting, m.s.Roster.Fresh = true, false
	m.emit(ListInstances{Step: p + "roster"})
	m.s.Next = ctx.Now + max(ms(m.opts.Period), 1)
	m.emit(SetTimer{machine.SetTimer{ID: RoundTimer, At: m.s.Next}})
}

// closeRound counts what did not answer as failed and re-evaluates the alerts.
func (m *Monitor) closeRound(ctx *machine.Ctx) {
	if !m.s.Open {
		return
	}
	m.s.Open = false
	const late = "no reply within the period"
	for i := range m.s.Shards {
		sh := &m.s.Shards[i]
		if sh.Awaiting {
			sh.Awaiting = false
			sh.Failures++
			sh.Err = late
			ctx.Emit(Spec, ActScan, machine.U("round", m.s.Round), machine.S("shard", sh.Name), machine.B("ok", false), machine.S("err", late))
		}
	}
	if m.s.Roster.Awaiting {
		m.s.Roster.Awaiting = false
		ctx.Emit(Spec, ActRoster, machine.U("round", m.s.Round), machine.B("ok", false), machine.S("err", late))
	}
	m.evaluate(ctx)
}

// --- Alerts -------------------------------------------------------------------------------

// orphaned reports whether reason says the coordinator that prepared the branch is gone or
// restarted since: no process will finish it.
func orphaned(reason Reason) bool { return reason == ReasonGone || reason == ReasonRestarted }

// evaluate decides the alerts from the last known state of every shard and the roster, and
// issues Alert for each new or changed one and ClearAlert for each that went away.
func (m *Monitor) evaluate(ctx *machine.Ctx) {
	threshold := ms(m.opts.Threshold)
	want := map[string]*Alert{}
	add := func(id string, proto Alert, txn string, origin int64, p Part) {
		a, ok := want[id]
		if !ok {
			proto.ID = id
			a = &proto
			want[id] = a
		} else if orphaned(proto.Reason) && !orphaned(a.Reason) {
			// One branch its coordinator will not finish makes the alert an orphan's,
			// whichever branch was read first: stuck says the coordinator runs.
			a.Reason = proto.Reason
		}
		for i := range a.Txns {
			if a.Txns[i].Name == txn {
				a.Txns[i].Prepared = min(a.Txns[i].Prepared, origin)
				a.Txns[i].Parts = append(a.Txns[i].Parts, p)
				return
			}
		}
		a.Txns = append(a.Txns, Txn{Name: txn, Prepared: origin, Parts: []Part{p}})
	}
	for _, sh := range m.s.Shards {
		if sh.Failures >= m.opts.BlindAfter {
			want["unscanned/"+sh.Name] = &Alert{ID: "unscanned/" + sh.Name, Reason: ReasonUnscanned, Shard: sh.Name}
		}
		for _, x := range sh.Xacts {
			origin := x.Prepared
			if origin == 0 {
				origin = x.FirstSeen
			}
			if ctx.Now-origin < threshold {
				continue // young: PgDog's own commit is most likely still running
			}
			part := Part{Shard: sh.Name, GID: x.GID, Owner: x.Owner, Database: x.Database}
			g, err := ParseGID(x.GID, m.opts.Deployment)
			if err != nil {
				add("foreign/"+sh.Name, Alert{Reason: ReasonForeign, Shard: sh.Name}, x.GID, origin, part)
				continue
			}
			id := "coordinator/" + g.Instance
			if m.opts.Mutant == MutantGroupByShard {
				id = "coordinator/" + sh.Name
			}
			reason := m.verdict(g.Instance, origin)
			if !m.s.Roster.Fresh {
				// No roster this round: keep what was decided, and decide nothing new but
				// stuck, which needs no roster (a branch that old is in doubt whoever runs:
				// without this, a roster that keeps failing, the orchestrator's API down,
				// would leave every branch unalerted for as long).
				reason = ""
				if prev, ok := m.findAlert(id); ok {
					reason = prev.Reason
				}
			}
			if reason == "" && ctx.Now-origin >= m.opts.StuckAfter.Milliseconds() {
				reason = ReasonStuck // PgDog's retries would have finished it long ago
			}
			if reason == "" {
				continue // its coordinator runs and prepared it: PgDog retries by itself
			}
			add(id, Alert{Reason: reason, Deployment: g.Deployment, Instance: g.Instance}, g.Txn, origin, part)
		}
	}
	ids := make([]string, 0, len(want))
	for id := range want {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	next := make([]Alert, 0, len(ids))
	for _, id := range ids {
		a := want[id]
		slices.SortFunc(a.Txns, func(x, y Txn) int {
			return cmp.Or(cmp.Compare(x.Prepared, y.Prepared), strings.Compare(x.Name, y.Name))
		})
		for i := range a.Txns {
			slices.SortFunc(a.Txns[i].Parts, func(x, y Part) int { return cmp.Or(strings.Compare(x.Shard, y.Shard), strings.Compare(x.GID, y.GID)) })
		}
		a.Since = ctx.Now
		prev, existed := m.findAlert(id)
		if existed {
			a.Since, a.Step = prev.Since, prev.Step
		}
		if !existed || !reflect.DeepEqual(prev, *a) {
			a.Step = m.roundPrefix() + "alert/" + id
			ctx.Emit(Spec, ActAlert, machine.S("id", id), machine.S("reason", string(a.Reason)), machine.I("txns", int64(len(a.Txns))), machine.S("gids", gidsField(a.Txns)))
		}
		next = append(next, *a)
	}
	decided := map[string]Delivery{}
	for _, a := range next {
		if prev, ok := m.findAlert(a.ID); !ok || prev.Step != a.Step {
			decided[a.ID] = Delivery{ID: a.ID, Step: a.Step}
		}
	}
	for _, prev := range m.s.Alerts {
		if _, ok := want[prev.ID]; !ok {
			ctx.Emit(Spec, ActClear, machine.S("id", prev.ID))
			decided[prev.ID] = Delivery{ID: prev.ID, Step: m.roundPrefix() + "clear/" + prev.ID, Clear: true}
		}
	}
	m.s.Alerts = next
	// The new decisions replace what was waiting for their IDs; everything in the outbox
	// is (re)sent.
	for _, d := range m.s.Outbox {
		if _, ok := decided[d.ID]; !ok {
			decided[d.ID] = d
		}
	}
	m.s.Outbox = m.s.Outbox[:0]
	for _, d := range decided {
		m.s.Outbox = append(m.s.Outbox, d)
	}
	slices.SortFunc(m.s.Outbox, func(a, b Delivery) int { return strings.Compare(a.ID, b.ID) })
	m.sendOutbox()
}

// sendOutbox issues every delivery not yet acknowledged.
func (m *Monitor) sendOutbox() {
	for _, d := range m.s.Outbox {
		if d.Clear {
			m.emit(ClearAlert{Step: d.Step, ID: d.ID})
			continue
		}
		a, _ := m.findAlert(d.ID)
		m.emit(a.clone())
	}
}

func (m *Monitor) delivered(ctx *machine.Ctx, r Delivered) {
	i := slices.IndexFunc(m.s.Outbox, func(d Delivery) bool { return d.Step == r.Step })
	if i < 0 {
		return // an older decision's delivery, or a repeated acknowledgement
	}
	d := m.s.Outbox[i]
	fs := []machine.Field{machine.S("id", d.ID), machine.B("clear", d.Clear), machine.B("ok", r.Err == nil)}
	if r.Err != nil {
		ctx.Emit(Spec, ActDeliver, append(fs, machine.S("err", r.Err.Error()))...)
		return // sent again at the next round
	}
	ctx.Emit(Spec, ActDeliver, fs...)
	if m.opts.Mutant == MutantResendAcked {
		return
	}
	m.s.Outbox = slices.Delete(m.s.Outbox, i, i+1)
}

// verdict says whether instance can still finish a transaction prepared at origin: ""
// when a process with that id runs and started before it, ReasonRestarted when it started
// after, ReasonGone when none runs.
func (m *Monitor) verdict(instance string, origin int64) Reason {
	ps := m.s.Roster.Processes
	i, ok := slices.BinarySearchFunc(ps, instance, func(p Process, id string) int { return strings.Compare(p.ID, id) })
	switch {
	case !ok:
		return ReasonGone
	case ps[i].Started > origin:
		return ReasonRestarted
	}
	return ""
}

func (m *Monitor) findAlert(id string) (Alert, bool) { return findAlert(m.s.Alerts, id) }

func findAlert(alerts []Alert, id string) (Alert, bool) {
	i, ok := slices.BinarySearchFunc(alerts, id, func(a Alert, id string) int { return strings.Compare(a.ID, id) })
	if !ok {
		return Alert{}, false
	}
	return alerts[i], true
}
