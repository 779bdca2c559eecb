package check

import (
	"fmt"
	"maps"
	"slices"

	"loam.dev/router/detsim"
)

// The ConfigPush machine's step invariants, checked on the commands it issues. They are the
// same code in both tiers: the machine's world test (machine/configpush, property_test.go)
// feeds Steps every command and effect of its world, and the simulator's reference daemon
// (detsim/scenario, daemon.go) every command it executes and every files write that lands.
// Before they were shared the simulator looked only at the effects (Generations), so a
// write issued while another was in flight, or a RELOAD issued before its files were on
// disk, passed whenever the files target or the timing happened to save it.
const (
	// InvFilesOnlyPublished: the files of generation g are written only once the record
	// publishes g (Generations checks the same on the writes that land).
	InvFilesOnlyPublished = "files-only-published"
	// InvGenerationsIncrease: generations only increase (here: those WriteFiles and each
	// instance's RELOADs name).
	InvGenerationsIncrease = "generations-increase"
	// InvOneWrite: no files write is issued while another step's write is awaited (issued,
	// not answered, its step's deadline not passed). A write whose answer was an error or
	// came too late may still land after the next one: the files target's generation check
	// (ErrNewerGeneration) is what keeps that from going backwards.
	InvOneWrite = "push-one-write"
	// InvReloadAfterFiles: an instance is told to RELOAD generation g only once g's files
	// were written: an earlier RELOAD re-reads the files it already had.
	InvReloadAfterFiles = "push-reload-after-files"
	// InvPushEnds: every push whose files were asked for ends with an Outcome, even when
	// nothing answers any more.
	InvPushEnds = "push-ends"
	// InvReloadAfterSeen: with Options.AwaitFiles (files that reach each pod late, as a
	// kubelet projects a ConfigMap), an instance is told to RELOAD generation g only while
	// its pod sees g's files or newer: an earlier RELOAD re-reads the old ones.
	InvReloadAfterSeen = "push-reload-after-seen"
	// InvConfirmedLoaded: an Outcome confirms an instance on generation g only if the
	// instance routes by g (or by a newer one that another writer, a cutover, gave it
	// since): the machine's belief about each instance is what the world last did to it.
	InvConfirmedLoaded = "push-confirmed-loaded"
)

// Steps follows one ConfigPush machine's commands (over every restart of its driver: a
// restored machine inherits what the previous one started). The zero value is not ready;
// use NewSteps.
type Steps struct {
	writes   map[string]int64 // files writes awaited: step -> deadline
	written  map[uint64]bool  // generations whose files a write carried out
	last     uint64           // the highest generation a WriteFiles named
	reloaded map[string]uint64
	started  map[uint64]bool // generations a WriteFiles named
	ended    map[uint64]bool // generations an Outcome (not a refusal) ended
}

// NewSteps returns a checker that has seen nothing.
func NewSteps() *Steps {
	return &Steps{writes: map[string]int64{}, written: map[uint64]bool{}, reloaded: map[string]uint64{},
		started: map[uint64]bool{}, ended: map[uint64]bool{}}
}

// WriteFiles checks a files write of generation gen for step, issued at now while the record
// publishes published; the machine awaits it until deadline (its step timeout). now and
// deadline are on the machine's clock.
func (p *Steps) WriteFiles(now int64, step string, gen, published uint64, deadline int64) *detsim.Violation {
	for s, at := range p.writes {
		if now >= at {
			delete(p.writes, s)
		}
	}
	var v *detsim.Violation
	switch others := slices.Sorted(maps.Keys(p.writes)); {
	case gen > published:
		v = &detsim.Violation{Invariant: InvFilesOnlyPublished, T: now,
			Detail: fmt.Sprintf("WriteFiles of generation %d while the store publishes %d", gen, published)}
	case gen < p.last:
		v = &detsim.Violation{Invariant: InvGenerationsIncrease, T: now,
			Detail: fmt.Sprintf("WriteFiles of generation %d after %d", gen, p.last)}
	case len(others) > 1 || len(others) == 1 && others[0] != step:
		v = &detsim.Violation{Invariant: InvOneWrite, T: now,
			Detail: fmt.Sprintf("WriteFiles %s issued while %v is awaited", step, others)}
	}
	p.last = max(p.last, gen)
	p.writes[step] = deadline
	p.started[gen] = true
	return v
}

// Written records that the files of gen landed on the files target.
func (p *Steps) Written(gen uint64) { p.written[gen] = true }

// Answered records that the machine got the answer to step's write: it awaits it no more.
func (p *Steps) Answered(step string) { delete(p.writes, step) }

// Reload checks a RELOAD of instance to generation gen, issued at now.
func (p *Steps) Reload(now int64, instance string, gen uint64) *detsim.Violation {
	var v *detsim.Violation
	switch {
	case !p.written[gen]:
		v = &detsim.Violation{Invariant: InvReloadAfterFiles, T: now,
			Detail: fmt.Sprintf("Reload of %s to generation %d before its files were written", instance, gen)}
	case gen < p.reloaded[instance]:
		v = &detsim.Violation{Invariant: InvGenerationsIncrease, T: now,
			Detail: fmt.Sprintf("Reload of %s to generation %d after %d", instance, gen, p.reloaded[instance])}
	}
	p.reloaded[instance] = max(p.reloaded[instance], gen)
	return v
}

// ReloadSeen checks a RELOAD of instance to generation gen, issued at now by a machine that
// awaits the files, while the instance's pod sees the files of generation sees.
func ReloadSeen(now int64, instance string, gen, sees uint64) *detsim.Violation {
	if sees < gen {
		return &detsim.Violation{Invariant: InvReloadAfterSeen, T: now,
			Detail: fmt.Sprintf("Reload of %s to generation %d while its pod sees generation %d's files", instance, gen, sees)}
	}
	return nil
}

// Confirmed checks an Outcome of generation gen issued at now: no instance it confirms
// routes by an older generation (loaded says what an instance routes by).
func Confirmed(now int64, gen uint64, confirmed []string, loaded func(instance string) uint64) *detsim.Violation {
	for _, id := range confirmed {
		if g := loaded(id); g < gen {
			return &detsim.Violation{Invariant: InvConfirmedLoaded, T: now,
				Detail: fmt.Sprintf("%s confirmed on generation %d while it routes by %d", id, gen, g)}
		}
	}
	return nil
}

// Outcome records the end of the push of gen (a refusal ends nothing: it never started).
func (p *Steps) Outcome(gen uint64, refused bool) {
	if !refused {
		p.ended[gen] = true
	}
}

// Ended checks, once nothing answers any more and every timer fired, that every push that
// asked for its files ended.
func (p *Steps) Ended(now int64) *detsim.Violation {
	for _, g := range slices.Sorted(maps.Keys(p.started)) {
		if !p.ended[g] {
			return &detsim.Violation{Invariant: InvPushEnds, T: now,
				Detail: fmt.Sprintf("the push of generation %d never reported an Outcome", g)}
		}
	}
	return nil
}
