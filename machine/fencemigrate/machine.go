package fencemigrate

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"loam.dev/router/kernel/fencing"
	"loam.dev/router/machine"
)

// Spec is the name of the TLA+ spec this machine's events belong to.
const Spec = "FencingMigration"

// Actions lists the spec actions the machine emits; a test checks each has an emitter.
var Actions = []string{"Report", "Alarm", "Allow", "Refuse", "Backfill", "BackfillDone",
	"DrainWait", "Scan", "Drained", "AskConfirm", "Enable", "Enabled"}

// DefaultLeaseTTL is the seed's DEFAULT_LEASE_TTL (30 s), used when Config.LeaseTTL is not
// positive: a zero drain wait would let the scan run before old leases could expire.
const DefaultLeaseTTL = 30_000

// Config parameterises a Machine.
type Config struct {
	// LeaseTTL is the directory's lease time to live (ms): the drain wait before the scan.
	// It must be at least the longest TTL any pod grants or renews with.
	LeaseTTL int64
	// Mutant M4 drops the backfill and drain gates into C (for tests that must see T3 trip).
	Mutant fencing.Mutant
}

// Machine is the rollout state. It holds no clients, clocks or goroutines.
type Machine struct {
	s Snapshot
}

// Snapshot is the whole state of a Machine, for persisting it between driver restarts.
type Snapshot struct {
	Config     Config
	Allowed    fencing.Version
	Pods       map[string]fencing.Version
	Backfilled bool
	Drained    bool
	Enabled    bool
	// Pending operation steps ("" when none) and the pending drain timer id.
	BackfillStep, ScanStep, DrainTimer, ConfirmToken, EnableStep string
	Seq                                                          uint64 // step id counter
}

// New returns a machine whose fleet runs O.
func New(cfg Config) *Machine {
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	return &Machine{s: Snapshot{Config: cfg, Pods: map[string]fencing.Version{}}}
}

// Snapshot returns a copy of the state.
func (m *Machine) Snapshot() Snapshot {
	s := m.s
	s.Pods = maps.Clone(m.s.Pods)
	return s
}

// Restore rebuilds a machine from a snapshot. A snapshot no machine could have written (a
// damaged or hand-made blob) is refused with the field named: resuming from it could allow
// C before the backfill, or open the door, on the word of whoever wrote the store.
func Restore(s Snapshot) (*Machine, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("fencemigrate: cannot restore: %w", err)
	}
	s.Pods = maps.Clone(s.Pods)
	if s.Pods == nil {
		s.Pods = map[string]fencing.Version{}
	}
	return &Machine{s: s}, nil
}

// check is what every snapshot of a machine satisfies.
func (s Snapshot) check() error {
	if s.Config.LeaseTTL <= 0 {
		return fmt.Errorf("Config.LeaseTTL is %d; it is a positive lease TTL in ms", s.Config.LeaseTTL)
	}
	if s.Allowed > fencing.C {
		return fmt.Errorf("Allowed is %v; want O, A, B or C", s.Allowed)
	}
	for _, p := range slices.Sorted(maps.Keys(s.Pods)) {
		if p == "" {
			return fmt.Errorf("Pods has a pod without a name")
		}
		if v := s.Pods[p]; v > fencing.C {
			return fmt.Errorf("Pods[%q] is %v; want O, A, B or C", p, v)
		}
	}
	switch {
	case s.Backfilled && s.Allowed < fencing.B:
		return fmt.Errorf("Backfilled is set while %v is allowed: the backfill runs only once B is", s.Allowed)
	case s.Drained && !s.Backfilled:
		return fmt.Errorf("Drained is set but Backfilled is not: the drain is proven only after the backfill")
	case s.Enabled && s.Allowed != fencing.C:
		return fmt.Errorf("Enabled is set while %v is allowed: the door opens only on C", s.Allowed)
	case s.Enabled && (s.ConfirmToken != "" || s.EnableStep != ""):
		return fmt.Errorf("Enabled is set with an enable still pending (ConfirmToken %q, EnableStep %q)", s.ConfirmToken, s.EnableStep)
	}
	for _, st := range []struct{ field, kind, v string }{
		{"BackfillStep", "backfill", s.BackfillStep}, {"ScanStep", "scan", s.ScanStep}, {"DrainTimer", "drain", s.DrainTimer},
		{"ConfirmToken", "enable", s.ConfirmToken}, {"EnableStep", "door", s.EnableStep},
	} {
		if st.v == "" {
			continue
		}
		n, ok := strings.CutPrefix(st.v, st.kind+"/")
		seq, err := strconv.ParseUint(n, 10, 64)
		if !ok || err != nil || seq == 0 || seq > s.Seq {
			return fmt.Errorf("%s is %q; want %s/<n> with n from 1 to Seq (%d)", st.field, st.v, st.kind, s.Seq)
		}
	}
	return nil
}

// Allowed is the newest version pods may run.
func (m *Machine) Allowed() fencing.Version { return m.s.Allowed }

// Enabled reports whether cluster mode has been enabled (the door is open for good).
func (m *Machine) Enabled() bool { return m.s.Enabled }

func (m *Machine) step(kind string) string {
	m.s.Seq++
	return fmt.Sprintf("%s/%d", kind, m.s.Seq)
}

// On consumes one input and returns the commands to execute.
func (m *Machine) On(ctx *machine.Ctx, in Input) []Command {
	var out []Command
	switch in := in.(type) {
	case PodReported:
		out = m.report(ctx, in)
	case PodGone:
		delete(m.s.Pods, in.Pod)
		ctx.Emit(Spec, "Report", machine.S("pod", in.Pod), machine.S("version", "gone"))
	case Advance:
		out = m.advance(ctx, in.To)
	case StartBackfill:
		out = m.startBackfill(ctx)
	case BackfillDone:
		if in.Step != m.s.BackfillStep || in.Step == "" {
			return nil // a stale or duplicate reply
		}
		m.s.BackfillStep = ""
		ok := in.Err == nil
		m.s.Backfilled = m.s.Backfilled || ok
		fields := []machine.Field{machine.S("step", in.Step), machine.B("ok", ok), machine.I("sessions", int64(in.Sessions))}
		ctx.Emit(Spec, "BackfillDone", fields...)
		if !ok {
			out = append(out, Alarm{Detail: fmt.Sprintf("backfill %s failed: %v (request it again)", in.Step, in.Err)})
		}
	case OldLeasesScanned:
		if in.Step != m.s.ScanStep || in.Step == "" {
			return nil
		}
		m.s.ScanStep = ""
		if in.Err == nil && in.Live == 0 && m.drainable() {
			m.s.Drained = true
			ctx.Emit(Spec, "Drained", machine.S("step", in.Step))
		} else if in.Err != nil {
			out = append(out, Alarm{Detail: fmt.Sprintf("old-lease scan %s failed: %v (the scan is retried after one lease TTL)", in.Step, in.Err)})
		}
	case TimerFired:
		if in.ID != m.s.DrainTimer || in.ID == "" {
			return nil
		}
		m.s.DrainTimer = ""
		if m.drainable() {
			m.s.ScanStep = m.step("scan")
			ctx.Emit(Spec, "Scan", machine.S("step", m.s.ScanStep))
			out = append(out, ScanOldLeases{Step: m.s.ScanStep})
		}
	case RequestEnable:
		out = m.requestEnable(ctx)
	case Confirm:
		out = m.confirm(ctx, in.Token)
	case ClusterEnabled:
		if in.Step != m.s.EnableStep || in.Step == "" {
			return nil
		}
		m.s.EnableStep = ""
		m.s.Enabled = m.s.Enabled || in.Err == nil
		ctx.Emit(Spec, "Enabled", machine.S("step", in.Step), machine.B("ok", in.Err == nil))
		if in.Err != nil {
			out = append(out, Alarm{Detail: fmt.Sprintf("enabling cluster mode (%s) failed: %v (check the cluster's mode before requesting it again)", in.Step, in.Err)})
		} else if !m.all(fencing.C) {
			// A pod left C while the command was out (its report raised an Alarm already):
			// the door is open under it, and its cross-slot scripts fail on the cluster.
			out = append(out, Alarm{Detail: fmt.Sprintf("cluster mode is enabled (%s) but %s; their scripts fail CROSSSLOT until they run C", in.Step, m.behind(fencing.C))})
		}
	}
	return append(out, m.maybeWait(ctx)...)
}

// doorCommitted: cluster mode is enabled, or the EnableCluster command is out and the
// switch may happen at any moment before its reply. From then on only C is allowed: the
// seed's door opens "only when the whole fleet runs C", and the machine cannot call back a
// command it has issued, so the fleet must stay on C from the command on, not only at the
// request. (The window {B, C} kept until the reply let a pod roll back to B and the door
// open under it with no Alarm: found by spec/FencingMigration.qnt, its mutant
// FencingMigration_EnableWindow.)
func (m *Machine) doorCommitted() bool { return m.s.Enabled || m.s.EnableStep != "" }

// drainable: the state in which old-key authority can only shrink — every pod on B (no pod
// writes old leases any more) and the old counters folded in.
func (m *Machine) drainable() bool {
	return !m.s.Enabled && m.s.Allowed >= fencing.B && m.s.Backfilled && m.all(fencing.B, fencing.C)
}

// maybeWait arms the drain timer when the drain can start and has not been proven.
//
// The wait is not what makes the drain safe: the scan is (a live old-key lease it finds
// means no drain, whenever it runs), and no world breaks with a zero wait (make mutate:
// At = Now keeps every property and simulation green). It is kept to pace the scans, each
// a full SCAN of every primary: an old-key lease granted before the backfill lives up to
// one LeaseTTL unless renewed, so a scan sooner finds it and the next follows at once.
// TestRolloutReachesTheDoor checks the wait is a whole LeaseTTL.
func (m *Machine) maybeWait(ctx *machine.Ctx) []Command {
	if m.s.Drained || m.s.DrainTimer != "" || m.s.ScanStep != "" || !m.drainable() {
		return nil
	}
	m.s.DrainTimer = m.step("drain")
	at := ctx.Now + m.s.Config.LeaseTTL
	ctx.Emit(Spec, "DrainWait", machine.S("timer", m.s.DrainTimer), machine.I("at", at))
	return []Command{SetTimer{machine.SetTimer{ID: m.s.DrainTimer, At: at}}}
}

func (m *Machine) report(ctx *machine.Ctx, in PodReported) []Command {
	m.s.Pods[in.Pod] = in.Version
	ctx.Emit(Spec, "Report", machine.S("pod", in.Pod), machine.S("version", in.Version.String()))
	lo := m.s.Allowed
	if lo > fencing.O && !m.doorCommitted() {
		lo--
	}
	var out []Command
	if in.Version < lo || in.Version > m.s.Allowed {
		detail := fmt.Sprintf("pod %s runs %s but only %s..%s are allowed (stop it or roll it to %s)", in.Pod, in.Version, lo, m.s.Allowed, m.s.Allowed)
		ctx.Emit(Spec, "Alarm", machine.S("pod", in.Pod), machine.S("version", in.Version.String()))
		out = append(out, Alarm{Pod: in.Pod, Detail: detail})
	}
	if in.Version < fencing.B && m.s.Drained {
		// An old-key writer is back: the drain must be proven again.
		m.s.Drained = false
	}
	if in.Version == fencing.O && m.s.Backfilled {
		// O bumps only the old counter: the new one may have fallen behind again.
		m.s.Backfilled = false
	}
	return out
}

func (m *Machine) all(vs ...fencing.Version) bool {
	if len(m.s.Pods) == 0 {
		return false
	}
	for _, v := range m.s.Pods {
		if !slices.Contains(vs, v) {
			return false
		}
	}
	return true
}

// behind lists the pods not on v (or later), for refusal details.
func (m *Machine) behind(v fencing.Version) string {
	if len(m.s.Pods) == 0 {
		return "no pod has reported its version"
	}
	var b []string
	for _, p := range slices.Sorted(maps.Keys(m.s.Pods)) {
		if m.s.Pods[p] < v {
			b = append(b, p+"="+m.s.Pods[p].String())
		}
	}
	return fmt.Sprintf("pods not on %s: %s (wait for them to report %s)", v, strings.Join(b, ","), v)
}

func (m *Machine) refuse(ctx *machine.Ctx, req string, g Gate, detail string) []Command {
	ctx.Emit(Spec, "Refuse", machine.S("request", req), machine.S("gate", string(g)))
	return []Command{Refused{Request: req, Gate: g, Detail: detail}}
}

// gateC returns the first gate into C that does not hold.
func (m *Machine) gateC() (Gate, string) {
	if !m.all(fencing.B) {
		return GateFleetOnB, m.behind(fencing.B)
	}
	return m.gateDrained()
}

// gateDrained is the drain condition shared by the gate into C and the door: the backfill
// has run, and the latest complete scan found no live old-key lease with no old-key writer
// reported since. Mutant M4 drops it.
func (m *Machine) gateDrained() (Gate, string) {
	if m.s.Config.Mutant == fencing.M4 {
		return "", ""
	}
	if !m.s.Backfilled {
		return GateBackfilled, "the backfill has not completed (request it with StartBackfill)"
	}
	if !m.s.Drained {
		return GateDrained, "no complete scan has yet found zero live old-key leases one lease TTL after the backfill (wait for the drain timer)"
	}
	return "", ""
}

func (m *Machine) advance(ctx *machine.Ctx, to fencing.Version) []Command {
	req := "allow " + to.String()
	if m.s.Enabled {
		return m.refuse(ctx, req, GateDoorClosed, "cluster mode is enabled; the rollout is over")
	}
	if to != m.s.Allowed+1 || to > fencing.C {
		return m.refuse(ctx, req, GateAdjacent, fmt.Sprintf("%s is allowed now; only the next version may follow it", m.s.Allowed))
	}
	if to == fencing.C {
		if g, d := m.gateC(); g != "" {
			return m.refuse(ctx, req, g, d)
		}
	} else if !m.all(m.s.Allowed) && (to != fencing.A || len(m.s.Pods) != 0) {
		// Allowing A needs no report: O is the starting point. Any reported pod must be on O.
		return m.refuse(ctx, req, fleetGate(m.s.Allowed), m.behind(m.s.Allowed))
	}
	m.s.Allowed = to
	step := "allow/" + to.String()
	ctx.Emit(Spec, "Allow", machine.S("step", step), machine.S("version", to.String()))
	return []Command{AllowVersion{Step: step, Version: to}}
}

func (m *Machine) startBackfill(ctx *machine.Ctx) []Command {
	const req = "backfill"
	switch {
	case m.s.Enabled:
		return m.refuse(ctx, req, GateDoorClosed, "cluster mode is enabled; the old keys are unreachable")
	case m.s.BackfillStep != "":
		return m.refuse(ctx, req, GateInFlight, "backfill "+m.s.BackfillStep+" is running")
	case m.s.Backfilled:
		return m.refuse(ctx, req, GateOnce, "the backfill has completed; it runs once")
	case m.s.Allowed < fencing.B:
		return m.refuse(ctx, req, GateFleetOnB, fmt.Sprintf("%s is allowed, not B: the backfill runs once the whole fleet runs B", m.s.Allowed))
	case !m.all(fencing.B, fencing.C):
		return m.refuse(ctx, req, GateFleetOnB, m.behind(fencing.B))
	}
	m.s.BackfillStep = m.step("backfill")
	ctx.Emit(Spec, "Backfill", machine.S("step", m.s.BackfillStep))
	return []Command{RunBackfill{Step: m.s.BackfillStep}}
}

// gateEnable returns the first gate of the one-way door that does not hold.
func (m *Machine) gateEnable() (Gate, string) {
	switch {
	case m.s.Enabled:
		return GateDoorClosed, "cluster mode is already enabled"
	case m.s.EnableStep != "":
		return GateInFlight, "enable " + m.s.EnableStep + " is in flight"
	case m.s.Allowed != fencing.C:
		return GateFleetOnC, fmt.Sprintf("%s is allowed, not C: the fleet must run C before the door", m.s.Allowed)
	case !m.all(fencing.C):
		return GateFleetOnC, m.behind(fencing.C)
	}
	return m.gateDrained()
}

func (m *Machine) requestEnable(ctx *machine.Ctx) []Command {
	if g, d := m.gateEnable(); g != "" {
		return m.refuse(ctx, "enable", g, d)
	}
	step := m.step("enable")
	m.s.ConfirmToken = step
	ctx.Emit(Spec, "AskConfirm", machine.S("step", step))
	return []Command{AskConfirmation{Step: step, Token: step,
		Reason: "enabling cluster mode cannot be undone: every pod runs C and old-key authority is drained; confirm with this token"}}
}

func (m *Machine) confirm(ctx *machine.Ctx, token string) []Command {
	if g, d := m.gateEnable(); g != "" {
		return m.refuse(ctx, "enable", g, d)
	}
	if m.s.ConfirmToken == "" || token != m.s.ConfirmToken {
		return m.refuse(ctx, "enable", GateConfirmed, fmt.Sprintf("confirmation %q does not match an outstanding request (send RequestEnable and echo its token)", token))
	}
	m.s.ConfirmToken = ""
	m.s.EnableStep = m.step("door")
	ctx.Emit(Spec, "Enable", machine.S("step", m.s.EnableStep))
	return []Command{EnableCluster{Step: m.s.EnableStep}}
}
