package check

import (
	"fmt"

	"loam.dev/router/detsim"
)

// InvCausalRead is the causal-read invariant: no read a session makes through the causal
// selector sees less than the session's last acknowledged write.
const InvCausalRead = "causal-read"

// CausalRead is one read a session made through the causal selector and an endpoint
// answered: Wrote is the commit position of the session's last acknowledged write when the
// read was asked for (0 when it had none), Saw the position the serving endpoint had
// replayed when it ran the read (a standby's replay position, the primary's insert
// position).
type CausalRead struct {
	Session  string
	ID       uint64
	Endpoint string
	Wrote    uint64
	Saw      uint64
	T        int64
}

// CausalReads checks InvCausalRead over the reads that were answered. A read that failed or
// timed out saw nothing and is not in the list; a write whose acknowledgement was lost is
// not the session's last acknowledged write (the session never learnt it committed), so it
// does not count either.
func CausalReads(reads []CausalRead) *detsim.Violation {
	for _, r := range reads {
		if r.Saw < r.Wrote {
			return &detsim.Violation{Invariant: InvCausalRead, T: r.T,
				Detail: fmt.Sprintf("session %s read %d on %s saw position %d, before its last acknowledged write at %d",
					r.Session, r.ID, r.Endpoint, r.Saw, r.Wrote)}
		}
	}
	return nil
}
