// Package causal decides which endpoints may serve a request so that a read observes the
// frontend's own earlier writes, using LSN history instead of pinning reads to the primary.
// It is the per-query causal read of a Postgres proxy (lsn_from_hostgroup) as a sans-I/O
// machine that any router, proxy or application holding connection pools can drive.
//
// Spec: CausalRead. Actions: Configure, Observe, Record, Require, Resolve, Route, Wait, Expire, Abandon, Disconnect.
//
// # What it keeps
//
//   - Per frontend, one record per hostgroup: {endpoint, completion time}. Every actual
//     execution replaces the record of the hostgroup it ran in (Executed), whichever server
//     of the hostgroup served it and whether or not any rule reads it, so an execution made
//     before a causal rule existed is usable by the rule.
//   - Per physical endpoint, the LSN history fed by the monitor (Sampled), shared by every
//     hostgroup the endpoint belongs to (see loam.dev/router/kernel/lsn for pruning).
//   - Hostgroup memberships (SetHostgroup): lists of endpoints, nothing copied per membership.
//
// # Requests
//
// An ordinary request (Acquire) is routed at once to the hostgroup's members in random order;
// it never reads or changes LSN state. A causal request (AcquireCausal: destination hostgroup,
// source hostgroup From, acquisition deadline) fixes its requirement once, when it arrives:
// the position of the first retained successful sample of the recorded source endpoint sent
// strictly after the recorded completion time. If no such sample exists yet the requirement
// is pending and becomes fixed with the first one that arrives; later executions of the
// frontend never change it. The destination's members are filtered to those whose latest
// sample has reached the requirement. While none has, the request waits for new samples
// until its deadline, which is the ordinary acquisition deadline: there is no separate wait
// setting and no fallback to another hostgroup. A frontend without a record for From has
// nothing to be causal about and is routed like an ordinary request.
//
// The machine never asks for SQL on an application connection: progress comes only from the
// monitor's own connections (Sampled), so the queries an application sends are never added to.
//
// # Driver loop
//
//	m := causal.New(causal.Config{Window: 60_000})
//	// Feed, in any interleaving, each with ctx.Now = the driver's monotonic clock in ms:
//	//   SetHostgroup when memberships change;
//	//   Sampled for every poll of every endpoint (Sample.Sent read before the poll was sent);
//	//   Executed after an application execution completed (ctx.Now read after completion);
//	//   Acquire / AcquireCausal for each request, Cancel when its caller gives up;
//	//   TimerFired when a SetTimer deadline passes; Disconnected when a frontend goes away.
//	for _, c := range m.On(ctx, in) {
//	    switch c := c.(type) {
//	    case causal.Route:       // acquire a connection from c.Endpoints, trying them in order
//	    case causal.Fail:        // return c.Err to the request's caller
//	    case causal.SetTimer:    // arm c.ID for c.At; feed TimerFired{ID} when it passes
//	    case causal.CancelTimer: // disarm c.ID (a TimerFired that raced it is ignored)
//	    }
//	}
//
// Every endpoint in a Route had reached the requirement when the route was made; replay
// progress only grows, so trying them in order, within the same deadline, keeps the read
// causal. Clocks must be monotonic and shared by the monitor and the request path: the
// requirement compares a sample's send time with an execution's completion time.
package causal
