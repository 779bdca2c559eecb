//go:build loam_mutant_indoubt_commit

package indoubt

import "loam.dev/router/machine"

// This file exists only in builds with -tags loam_mutant_indoubt_commit: the simulator's
// mutant "the monitor commits a transaction in doubt", which its atomicity checker must
// catch. Nothing in a normal build can name this type.

// CommitPrepared is the mutant's guess: commit a transaction whose coordinator is gone.
type CommitPrepared struct {
	Shard string
	GID   string
}

func (CommitPrepared) isCommand() {}

// mutate adds a CommitPrepared for every branch of every coordinator alert raised in this
// step: exactly the guess §6.5 forbids.
func (m *Monitor) mutate(ctx *machine.Ctx, out []Command) []Command {
	n := len(out)
	for _, c := range out[:n] {
		a, ok := c.(Alert)
		if !ok || (a.Reason != ReasonGone && a.Reason != ReasonRestarted) {
			continue
		}
		for _, t := range a.Txns {
			for _, p := range t.Parts {
				ctx.Emit(Spec, "MutantCommitPrepared", machine.S("shard", p.Shard), machine.S("gid", p.GID))
				out = append(out, CommitPrepared{Shard: p.Shard, GID: p.GID})
			}
		}
	}
	return out
}
