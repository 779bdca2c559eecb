package causal_test

import (
	"errors"
	"fmt"

	"loam.dev/router/machine"
	"loam.dev/router/machine/causal"
)

// checkTrace checks the spec events of one input against the input and the commands it
// returned: the spec replay (spec/causal_replay_test.go) and the property's requirement
// checks read these events, and make mutate found that dropping a Record, a Require or a
// Route event (a flipped ctx.Trace guard) was seen by the golden scripts' text alone.
// Executed records exactly once what ran where and when; an AcquireCausal that is not
// refused outright fixes (or leaves pending) its requirement exactly once; every Route
// has one Route event naming its first endpoint, how many may serve it and the
// requirement it was filtered by; and every wait armed (SetTimer) is for a deadline still
// ahead, with its Wait event: a request whose deadline has come fails at once, it is not
// kept waiting on a timer already due; a waiting request cancelled, or dropped with its
// frontend, is abandoned once, saying why.
func checkTrace(now int64, in causal.Input, cmds []causal.Command, evs []machine.SpecEvent) error {
	count := func(action string, match func(machine.SpecEvent) bool) int {
		n := 0
		for _, e := range evs {
			if e.Action == action && match(e) {
				n++
			}
		}
		return n
	}
	str := func(e machine.SpecEvent, k string) string { v, _ := e.Get(k); return v.Str() }
	num := func(e machine.SpecEvent, k string) int64 { v, _ := e.Get(k); return v.Int() }
	isReq := func(id uint64) func(machine.SpecEvent) bool {
		return func(e machine.SpecEvent) bool { return uint64(num(e, "req")) == id }
	}
	switch in := in.(type) {
	case causal.Executed:
		if n := count(causal.ActRecord, func(e machine.SpecEvent) bool {
			return str(e, "frontend") == in.Frontend && num(e, "hg") == int64(in.Hostgroup) && str(e, "ep") == in.Endpoint.String() && num(e, "at") == now
		}); n != 1 {
			return fmt.Errorf("trace: execution of %s in hostgroup %d on %s at %d recorded %d times: %v", in.Frontend, in.Hostgroup, in.Endpoint, now, n, evs)
		}
	case causal.AcquireCausal:
		refused := false
		for _, c := range cmds {
			if f, ok := c.(causal.Fail); ok && f.ID == in.ID && (errors.Is(f.Err, causal.ErrNoEndpoints) || errors.Is(f.Err, causal.ErrDuplicateRequest)) {
				refused = true
			}
		}
		if n := count(causal.ActRequire, isReq(in.ID)); !refused && n != 1 {
			return fmt.Errorf("trace: request %d's requirement stated %d times: %v", in.ID, n, evs)
		}
	}
	abandoned := func(id uint64, why string) bool {
		return count(causal.ActAbandon, func(e machine.SpecEvent) bool { return isReq(id)(e) && str(e, "why") == why }) == 1
	}
	for _, c := range cmds {
		switch c := c.(type) {
		case causal.CancelTimer:
			if cn, ok := in.(causal.Cancel); ok && !abandoned(cn.ID, "cancelled") {
				return fmt.Errorf("trace: request %d cancelled with no Abandon event: %v", cn.ID, evs)
			}
		case causal.Fail:
			if errors.Is(c.Err, causal.ErrDisconnected) && !abandoned(c.ID, "disconnected") {
				return fmt.Errorf("trace: request %d abandoned by its frontend's disconnect with no Abandon event: %v", c.ID, evs)
			}
		case causal.Route:
			want := ""
			if c.Constrained {
				want = c.Requirement.String()
			}
			if n := count(causal.ActRoute, func(e machine.SpecEvent) bool {
				causalV, _ := e.Get("causal")
				return isReq(c.ID)(e) && causalV.Bool() == c.Causal && str(e, "ep") == c.Endpoints[0].String() &&
					num(e, "eligible") == int64(len(c.Endpoints)) && str(e, "lsn") == want
			}); n != 1 {
				return fmt.Errorf("trace: %+v has %d Route events that say so: %v", c, n, evs)
			}
		case causal.SetTimer:
			if c.At <= now {
				return fmt.Errorf("a wait armed at %d for %s, due at %d: the request's deadline has come", now, c.ID, c.At)
			}
			if n := count(causal.ActWait, func(e machine.SpecEvent) bool { return num(e, "deadline") == c.At }); n == 0 {
				return fmt.Errorf("trace: wait %s armed with no Wait event: %v", c.ID, evs)
			}
		}
	}
	return nil
}
