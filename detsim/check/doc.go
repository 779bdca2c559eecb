// Package check holds the simulator's checkers: functions over a run's client history and
// the models' histories that return the first invariant violation, by a stable name. Every
// one treats an indeterminate outcome (a timeout, a reset, a session ended under a
// transaction) as "may have applied": it is never a failure of the system under test, and
// both its presence and its absence in the data are accepted. Each invariant has a named
// mutant that trips it, in the scenario tests.
//
// Several are shared with the machines' world tests, which call them on their own worlds'
// state (issue 20 item 2): in-doubt's NoEarlyAlert and Decisions (machine/indoubt), the
// cutover's step and claim invariants, Publish, Resume and Claims, its fences at Done,
// FencesAtDone, and its retry alerts, Failures (machine/cutover), the failover's Done, FailoverDone (machine/failover),
// ConfigPush's step invariants, Steps, and its beliefs about each instance, ReloadSeen and
// Confirmed (machine/configpush, the kubelet world too), and the Vitess reshard's, Reshard,
// Mirror and RecordChanges (machine/vreshard). They take plain values, not the simulator's
// models, so that both tiers can feed them.
package check
