package check

import (
	"errors"

	"loam.dev/router/detsim"
	"loam.dev/router/detsim/model"
	"loam.dev/router/kernel/fencing"
)

// The fencing-key migration's theorems (seed 002), as invariant names. The checks are
// kernel/fencing's own (CheckSingleAuthority, CheckT1, CheckT2, CheckDrained): the
// simulator supplies the states and the history, it does not restate the theorems.
const (
	// InvT1 is single authority: at most one live lease per session across both keyspaces.
	InvT1 = "T1-single-authority"
	// InvT2 is generation monotonicity: generations granted per session strictly increase
	// across the counter handoff; none is granted twice.
	InvT2 = "T2-generations-increase"
	// InvT3 is the one-way door: cluster mode is enabled only once old-key authority is
	// drained (every old counter folded into its new counter, no live old lease).
	InvT3 = "T3-one-way-door"
)

// SingleAuthority is T1 on the server's keys now. A lease only comes to life inside a
// script, so checking after every script that ran checks every instant.
func SingleAuthority(v *model.Valkey, now int64) *detsim.Violation {
	return fencingViolation(fencing.CheckSingleAuthority(v.Keys(), v.Naming, v.Sessions, now), now)
}

// OneWayDoor is T3, checked on the keys at the instant cluster mode is enabled.
func OneWayDoor(v *model.Valkey, now int64) *detsim.Violation {
	return fencingViolation(fencing.CheckDrained(v.Keys(), v.Naming, v.Sessions, now), now)
}

// FencingHistory checks T2 and T1 on every script the server ran: no generation granted
// twice, each grant's generation above every earlier grant's, and no grant while another
// lease of the session was certainly live (from its grant or last renew until its TTL ran
// out or its release). The server's stamps order the scripts as they ran.
func FencingHistory(h fencing.History, now int64) *detsim.Violation {
	if v := FencingT2(h, now); v != nil {
		return v
	}
	return fencingViolation(fencing.CheckT1(h), now)
}

// FencingT2 is T2 alone on the history: for runs whose time is abstract (exhaustive mode,
// where a lease ends by an expire step the history does not show), T1 is checked on the
// keys only.
func FencingT2(h fencing.History, now int64) *detsim.Violation {
	return fencingViolation(fencing.CheckT2(h), now)
}

func fencingViolation(err error, now int64) *detsim.Violation {
	if err == nil {
		return nil
	}
	inv := "fencing-check"
	switch {
	case errors.Is(err, fencing.ErrT1):
		inv = InvT1
	case errors.Is(err, fencing.ErrT2):
		inv = InvT2
	case errors.Is(err, fencing.ErrT3):
		inv = InvT3
	}
	return &detsim.Violation{Invariant: inv, T: now, Detail: err.Error()}
}
