package configpush_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine/configpush"
)

// TestRestoreRefusesInconsistentSnapshots: a snapshot that no machine could have produced
// (a corrupted or hand-edited blob) is refused with the field named, not resumed.
func TestRestoreRefusesInconsistentSnapshots(t *testing.T) {
	good := func() configpush.Snapshot {
		return configpush.Snapshot{Database: "app", Written: 3, Push: &configpush.Progress{
			Generation: 4, FilesStep: configpush.Step{State: configpush.StepDone, Attempt: 1, Limit: 5},
			Instances: []configpush.Instance{{ID: "a", Stage: configpush.StageConfirmed}, {ID: "b", Stage: configpush.StageReload}},
		}}
	}
	_, err := configpush.Restore(good(), configpush.Options{})
	require.NoError(t, err)
	_, err = configpush.Restore(configpush.Snapshot{}, configpush.Options{})
	require.NoError(t, err, "an empty snapshot is a fresh machine")

	for name, tc := range map[string]struct {
		edit func(*configpush.Snapshot)
		want string
	}{
		"zero generation":  {func(s *configpush.Snapshot) { s.Push.Generation = 0 }, "push.gen is 0"},
		"unsorted":         {func(s *configpush.Snapshot) { s.Push.Instances[0].ID = "z" }, "not sorted"},
		"duplicate":        {func(s *configpush.Snapshot) { s.Push.Instances[1].ID = "a" }, `"a" appears twice`},
		"unknown stage":    {func(s *configpush.Snapshot) { s.Push.Instances[1].Stage = "dancing" }, `unknown stage "dancing"`},
		"stray no push":    {func(s *configpush.Snapshot) { s.Push = nil; s.Stray = &configpush.Stray{Generation: 3} }, "without a push"},
		"stray not older":  {func(s *configpush.Snapshot) { s.Stray = &configpush.Stray{Generation: 4} }, "not older"},
		"stray not queued": {func(s *configpush.Snapshot) { s.Stray = &configpush.Stray{Generation: 3} }, "files_step"},
		"queued no stray":  {func(s *configpush.Snapshot) { s.Push.FilesStep.State = configpush.StepQueued }, "files_step"},
	} {
		t.Run(name, func(t *testing.T) {
			s := good()
			tc.edit(&s)
			_, err := configpush.Restore(s, configpush.Options{})
			require.ErrorContains(t, err, "configpush: cannot restore")
			require.ErrorContains(t, err, tc.want)
		})
	}
}
