//go:build !loam_mutant_indoubt_commit

package indoubt

import "loam.dev/router/machine"

// mutate is where the build-tagged mutant (mutant_commit.go) adds its forbidden commands.
// In every normal build it returns the commands unchanged: this build has no command type
// that could commit or roll back, so there is nothing it could add.
func (m *Monitor) mutate(_ *machine.Ctx, out []Command) []Command { return out }
