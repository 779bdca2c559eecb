package cutover_test

import (
	"fmt"

	"loam.dev/router/machine"
	"loam.dev/router/machine/cutover"
)

// A cutover begins by taking the record from resharding to cutting_over; its answer
// starts the copy on the designated instance.
func Example() {
	m := cutover.New()
	ctx := &machine.Ctx{Now: 1000}
	plan := cutover.Plan{Designated: "pgdog-1", Instances: []string{"pgdog-1", "pgdog-2"}, Role: "app", Publication: "app_pub"}
	for _, c := range m.On(ctx, cutover.Start{Record: fixture(), Plan: plan}) {
		fmt.Println(c)
	}
	for _, c := range m.On(ctx, cutover.RecordWritten{Step: "app/4/begin@12", Version: 13}) {
		fmt.Println(c)
	}
	// Output:
	// WriteRecord step=app/4/begin@12 expect=12 gen=4 phase=cutting_over to=5 at=copy
	// SetTimer id=app/4/catchup/deadline at=21601000
	// CopyData step=app/4/copy/pgdog-1 instance=pgdog-1 src=app dst=app__reshard_4 pub=app_pub slot=loam_app_4
}

// ClassifyTask turns PgDog's SHOW TASKS wording into the states the cutover decides on.
func ExampleClassifyTask() {
	fmt.Println(cutover.ClassifyTask("running", "replicating"))
	fmt.Println(cutover.ClassifyTask("running", "cutting over"))
	fmt.Println(cutover.ClassifyTask("failed: slot lost", ""))
	// Output:
	// replicating
	// cutting_over
	// failed
}

// SharedServers finds what Start refuses: a source and a destination shard on one server,
// which one role's fence cannot tell apart.
func ExampleSharedServers() {
	rec := fixture()
	rec.Target.Shards[3].Backend.Host = "10.0.1.1" // n3 next to s0
	for _, x := range cutover.SharedServers(rec) {
		fmt.Printf("%s and %s on %s\n", x.Source, x.Destination, x.Server)
	}
	// Output:
	// s0 and n3 on 10.0.1.1:5432
}
