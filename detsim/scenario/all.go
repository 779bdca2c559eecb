// Package scenario holds the simulator's scenarios: each builds a world of models and
// control-plane machines with their executors, drives a workload through it under faults,
// and checks the histories.
//
//   - traffic: list-append transactions through router instances (no machine): no
//     acknowledged write lost, snapshot isolation per shard, no phantom.
//   - bank: transfers under PgDog's 2PC with the in-doubt monitor on the daemon:
//     atomicity, conservation, the monitor never resolves, it alerts within threshold.
//   - push: ConfigPush on the daemon through generation bumps and reshards, with stray
//     and stale pushes: generations only increase, files only for published generations,
//     every instance converges.
//   - push-kubernetes: push with the files reaching each pod late (the kubelet), ConfigPush
//     awaiting them or not: the same, and no RELOAD before the pod sees the files.
//   - cutover: the cutover machine and ConfigPush on the daemon under list-append traffic,
//     with finalize, reverse and rollbacks (a CUTOVER that swapped and then failed, the
//     designated instance crashing after its swap): all of the above plus no write accepted
//     by one layout after the other began serving, and released instances route to
//     writable shards.
//   - fencing: the Valkey fencing-key migration (seed 002) with the rollout machine on the
//     daemon, fed the fleet's roster by the deploy system, and three pods using the
//     directory: T1, T2, T3, and the migration completes. Its mutant
//     fencing-roster-from-reports (the roster learnt from the pods' reports, as loamrouter
//     once did) was the simulator's finding.
//   - failover: the failover machine repointing a shard after its standby's promotion, for
//     PgDog (hand-off to ConfigPush) and Vitess (vtctld reparent): no acknowledged write
//     lost, one writable primary routed, the record mirrors Vitess, convergence.
//   - vreshard: machine/vreshard resharding a Vitess keyspace through a vtctld model, with
//     controller restarts: no step twice, writes only after a clean VDiff, the record
//     mirrors the PRIMARY partition, completion (vreshard.go).
//   - cutover-drain, cutover-windows, cutover-undo, cutover-late-reverse: the cutover's world with a window open
//     every run in which one of its protections is what keeps an invariant
//     (cutover_worlds.go).
//   - cutover-crash (not in All): the cutover's second tiny configuration, for exhaustive
//     mode (TestExploreCutoverCrash).
//   - fencing-late (KnownIssues, not in All): a known issue of the fencing migration,
//     reproduced by TestFencingKnownIssues.
//
// TestSim runs the corpus and fresh seeds of every scenario; TestMutants shows each
// invariant tripped by its named mutant; TestCoverage requires every declared fault point
// and rare path to fire over the CI seeds; TestExplore enumerates the tiny configurations.
//
// The race detector slows the simulator (one goroutine per run) ten times or more, so under
// -race TestSim runs 20 fresh seeds per scenario and the mutant, coverage and exhaustive
// sweeps skip: run the package without -race as well (go test ./detsim/...).
package scenario

import "loam.dev/router/detsim"

// All lists every scenario.
func All() []detsim.Scenario {
	return []detsim.Scenario{Traffic, Bank, Push, PushKubernetes, Cutover, Fencing, Failover,
		VReshard, Causal, CutoverDrain, CutoverWindows, CutoverUndo, CutoverLateReverse}
}

// KnownIssues lists the scenarios that reproduce a known issue (they fail by design;
// tests pin each).
func KnownIssues() []detsim.Scenario {
	return []detsim.Scenario{FencingLate}
}

// ByName finds a scenario, the exploration-only and known-issue ones included.
func ByName(name string) (detsim.Scenario, bool) {
	for _, sc := range append(append(All(), CutoverCrash), KnownIssues()...) {
		if sc.Name == name {
			return sc, true
		}
	}
	return detsim.Scenario{}, false
}
