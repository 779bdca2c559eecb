//go:build !loam_mutant_indoubt_commit

// (Under the commit mutant the transcripts differ: that build runs TestMutantCommitIsCaught.)

package indoubt_test

import (
	"fmt"

	"loam.dev/router/machine"
	"loam.dev/router/machine/indoubt"
)

// One shard holds a branch of a transaction whose coordinator, instance 2, is gone: once
// the branch is older than the threshold the monitor alerts, naming what an operator must
// resolve. It never offers to resolve it.
func Example() {
	m := indoubt.New(indoubt.Options{Deployment: "prod-app"})
	ctx := &machine.Ctx{Now: 0}
	x := indoubt.Xact{GID: "__pgdog_2pc_prod-app_2_77_0", Prepared: 0, Owner: "app", Database: "app"}
	live := []indoubt.Process{{ID: "0", Started: 0}}

	m.On(ctx, indoubt.Track{Shards: []string{"s0"}}) // round 1 starts at once
	m.On(ctx, indoubt.Prepared{Step: "r1/prepared/s0", Shard: "s0", Xacts: []indoubt.Xact{x}})
	m.On(ctx, indoubt.Roster{Step: "r1/roster", Processes: live}) // young: no alert

	ctx.Now = 6 * 60 * 1000 // six minutes later, the round timer has fired
	m.On(ctx, indoubt.TimerFired{ID: indoubt.RoundTimer})
	m.On(ctx, indoubt.Prepared{Step: "r2/prepared/s0", Shard: "s0", Xacts: []indoubt.Xact{x}})
	for _, c := range m.On(ctx, indoubt.Roster{Step: "r2/roster", Processes: live}) {
		a := c.(indoubt.Alert)
		p := a.Txns[0].Parts[0]
		fmt.Println(a.ID, a.Reason, p.Shard, p.GID, p.Database, p.Owner)
	}
	// Output:
	// coordinator/2 gone s0 __pgdog_2pc_prod-app_2_77_0 app app
}
