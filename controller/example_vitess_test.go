package controller_test

import (
	"context"
	"fmt"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/memstore"
	"loam.dev/router/controller"
	"loam.dev/router/kernel/keyrange"
	"loam.dev/router/kernel/shardmap"
)

// Asking for a Vitess keyspace's cutover: a Reshard of the record's shard 0 into -80 and
// 80-. PlanVitessCutover (what `cutover plan --to -80,80-` runs) builds the plan from vtctld,
// reading each target shard's primary, and checks it; here the plan is written out. The
// active controller runs the request with machine/vreshard, and `cutover status` follows it.
func ExampleRequests_StartVitessCutover() {
	ctx := context.Background()
	st := memstore.New()
	ref := adapters.DBRef{Namespace: "default", Database: "app"}
	rec, _ := shardmap.NewVindex("customer", shardmap.Key{Column: "id", Type: shardmap.Bigint}, shardmap.VindexHash,
		shardmap.Backend{Host: "10.0.0.1", Port: 3306, Database: "vt_customer", Tablet: "zone1-0000000100"})
	rec.Shards[0].Name = "0"
	v := rec.Layout.Scheme.(shardmap.Vindex)
	v.Ranges = []keyrange.Range{keyrange.MustParse("0")}
	rec.Layout.Scheme = v
	if _, err := st.CAS(ctx, ref, 0, rec); err != nil {
		fmt.Println(err)
		return
	}
	plan := controller.VitessPlan{Keyspace: "customer", Workflow: "split", Cell: "zone1", Source: []string{"0"}, Target: []string{"-80", "80-"},
		Backends: map[string]shardmap.Backend{
			"-80": {Host: "10.0.0.2", Port: 3306, Database: "vt_customer", Tablet: "zone1-0000000101"},
			"80-": {Host: "10.0.0.3", Port: 3306, Database: "vt_customer", Tablet: "zone1-0000000102"},
		}}
	r := controller.Requests{Store: st, By: "ops"}
	req, err := r.StartVitessCutover(ctx, ref, plan)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("requested from generation %d: %v into %v (workflow %s)\n", req.From, req.Vitess.Source, req.Vitess.Target, req.Vitess.Workflow)
	_, err = r.StartVitessCutover(ctx, ref, plan)
	fmt.Println("a second one:", err != nil)
	p, _, _ := controller.CutoverStatus(ctx, st, ref)
	fmt.Println("status: Vitess", p.Vitess, "steps", len(p.Steps))
	// Output:
	// requested from generation 1: [0] into [-80 80-] (workflow split)
	// a second one: true
	// status: Vitess true steps 9
}
