//go:build loam_mutant_indoubt_commit

package scenario

import (
	"loam.dev/router/detsim"
	"loam.dev/router/machine/indoubt"
)

// MutantIndoubtCommit is the monitor built with -tags loam_mutant_indoubt_commit: it
// commits the transactions it alerts about. It trips "indoubt-never-resolves".
const MutantIndoubtCommit = "indoubt-commit"

// indoubtMutants are the monitor mutants this build can run.
var indoubtMutants = []string{MutantIndoubtCommit}

// execMutant carries out the mutant's CommitPrepared on the shard, as a superuser (the
// fence does not stop it).
func (m *monitor) execMutant(cmd indoubt.Command) bool {
	c, ok := cmd.(indoubt.CommitPrepared)
	if !ok {
		return false
	}
	b, ok := m.shards[c.Shard]
	if !ok {
		return true
	}
	m.d.f.s.Net.Call(m.d.ctl.Node, b.Node, "commit prepared "+c.GID, 0,
		func(rep detsim.Reply) { _, err := b.Resolve("", 0, c.GID, true, monitorID); rep(nil, err) },
		func(any, error) {})
	return true
}

// MutantBuild reports whether this build bakes a mutant into a machine: in this one the
// in-doubt monitor always commits, so only the mutant tests are meaningful.
const MutantBuild = true
