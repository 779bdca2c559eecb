// Package fencemigrate is the rollout machine of the fencing-key migration: it decides when
// the fleet may move from script version O to A, B and C, when the backfill runs, when old-key
// authority counts as drained, and when cluster mode may be enabled — and refuses, naming the
// gate, every request whose gate does not hold.
//
// Why a machine: the migration is safe only if the fleet never spans more than two adjacent
// versions and every step waits for facts (every pod's reported version, the backfill's
// completion, a lease TTL with no live old-key lease). Those facts arrive from pods, scripts
// and timers in any order; a sans-I/O machine makes the order explicit, replayable and
// checkable (see kernel/fencing for the scripts' meaning and the invariants T1–T3).
//
// The gates, as the seed states them:
//
//	allow A        always (the fleet runs O)
//	allow B        every pod reports A
//	backfill       every pod reports B; once
//	allow C        every pod reports B, the backfill has run, and after one lease TTL a
//	               complete scan found no live old-key lease
//	enable         every pod reports C, and an explicit confirmation echoes the token the
//	               machine asked for: cluster mode cannot be turned off again
//
// A request to skip a version is refused (two-adjacent-versions). A pod reporting a version
// outside {allowed-1, allowed} raises an Alarm: the deploy system did something the machine
// did not allow, and old-key authority may have come back, so the drain is re-proven. From
// the EnableCluster command on, the range is {C} alone: the switch may happen at any moment
// before its reply and the door opens only on a fleet that runs C, so the deploy system must
// not roll a pod back once the enable is confirmed; a pod that leaves C then raises an Alarm,
// and so does a reply that opens the door under it.
//
// The driver loop (see loam.dev/router/machine for the contract):
//
//	m := fencemigrate.New(fencemigrate.Config{LeaseTTL: 30_000})
//	for in := range inputs {           // pod reports, operator requests, replies, timers
//	    for _, c := range m.On(ctx, in) {
//	        switch c := c.(type) {
//	        case fencemigrate.AllowVersion:   // tell the deploy system; pods report back
//	        case fencemigrate.RunBackfill:    // executor.Backfill; feed BackfillDone{Step}
//	        case fencemigrate.SetTimer:       // feed TimerFired{ID} at c.At
//	        case fencemigrate.ScanOldLeases:  // executor.LiveOldLeases; feed OldLeasesScanned{Step}
//	        case fencemigrate.AskConfirmation: // show the operator; feed Confirm{Token} if they agree
//	        case fencemigrate.EnableCluster:  // switch the cluster mode; feed ClusterEnabled{Step}
//	        case fencemigrate.Refused, fencemigrate.Alarm: // report to the operator
//	        }
//	    }
//	}
//
// Spec: FencingMigration. Actions: Report, Alarm, Allow, Refuse, Backfill, BackfillDone,
// DrainWait, Scan, Drained, AskConfirm, Enable, Enabled.
//
// Mutant M4 of the seed (Config.Mutant = fencing.M4) drops the backfill and drain gates into
// C; the tests show it lets the door open while old-key authority is live.
package fencemigrate
