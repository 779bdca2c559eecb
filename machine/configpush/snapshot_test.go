package configpush_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
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
		"zero generation":    {func(s *configpush.Snapshot) { s.Push.Generation = 0 }, "push.gen is 0"},
		"unsorted":           {func(s *configpush.Snapshot) { s.Push.Instances[0].ID = "z" }, "not sorted"},
		"duplicate":          {func(s *configpush.Snapshot) { s.Push.Instances[1].ID = "a" }, `"a" appears twice`},
		"unknown stage":      {func(s *configpush.Snapshot) { s.Push.Instances[1].Stage = "dancing" }, `unknown stage "dancing"`},
		"stray no push":      {func(s *configpush.Snapshot) { s.Push = nil; s.Stray = &configpush.Stray{Generation: 3} }, "without a push"},
		"stray not older":    {func(s *configpush.Snapshot) { s.Stray = &configpush.Stray{Generation: 5} }, "not older"},
		"stray same files":   {func(s *configpush.Snapshot) { s.Stray = &configpush.Stray{Generation: 4, Attempt: 1} }, "not older"},
		"stray not queued":   {func(s *configpush.Snapshot) { s.Stray = &configpush.Stray{Generation: 3} }, "files_step"},
		"queued no stray":    {func(s *configpush.Snapshot) { s.Push.FilesStep.State = configpush.StepQueued }, "files_step is \"queued\" but stray is false"},
		"from above attempt": {func(s *configpush.Snapshot) { s.Push.FilesStep.From = 2 }, "files_step.from 2 is above its attempt 1"},
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

// TestRestoreWithFilesChecksTheRecord: a snapshot is restored against the record in the
// store. One for another database, or with a generation pushed or written above the
// record's (the store never published it), is refused; files that match the digest are
// taken; files that do not end the push with ErrFilesChanged and nothing issued.
func TestRestoreWithFilesChecksTheRecord(t *testing.T) {
	files, err := render.NewFiles(render.File{Name: "users.toml", Data: []byte("password = \"pw\"\n")})
	require.NoError(t, err)
	rec := &shardmap.Record{Version: 9, Generation: 4, Router: shardmap.Router{Kind: shardmap.PgDog, Name: "app"}}
	snap := func() configpush.Snapshot {
		return configpush.Snapshot{Database: "app", Written: 3, Push: &configpush.Progress{
			Generation: 4, Version: 9, Digest: files.Digest(),
			FilesStep: configpush.Step{State: configpush.StepAwaiting, Attempt: 1, Limit: 5, At: 10},
			Instances: []configpush.Instance{{ID: "a", Stage: configpush.StageFiles}},
		}}
	}
	m, err := configpush.RestoreWithFiles(snap(), rec, files, configpush.Options{})
	require.NoError(t, err)
	require.Equal(t, files, m.Snapshot().Push.Files, "matching files are taken")
	cmds := m.On(&machine.Ctx{Now: 20, Trace: machine.Discard}, configpush.Restarted{})
	require.Contains(t, cmds, configpush.Command(configpush.WriteFiles{Step: "g4/files", Attempt: 1, Generation: 4, Files: files}))

	for name, tc := range map[string]struct {
		edit func(*configpush.Snapshot)
		want string
	}{
		"other database": {func(s *configpush.Snapshot) { s.Database = "other" }, `for database "other"`},
		"push above":     {func(s *configpush.Snapshot) { s.Push.Generation = 5 }, "push.gen is 5, above the record's generation 4"},
		"written above":  {func(s *configpush.Snapshot) { s.Written = 7 }, "written is generation 7"},
	} {
		t.Run(name, func(t *testing.T) {
			s := snap()
			tc.edit(&s)
			_, err := configpush.RestoreWithFiles(s, rec, files, configpush.Options{})
			require.ErrorContains(t, err, "configpush: cannot restore")
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, err = configpush.RestoreWithFiles(snap(), nil, files, configpush.Options{})
	require.ErrorContains(t, err, "no record")

	other, err := render.NewFiles(render.File{Name: "users.toml", Data: []byte("password = \"rotated\"\n")})
	require.NoError(t, err)
	m, err = configpush.RestoreWithFiles(snap(), rec, other, configpush.Options{})
	require.NoError(t, err)
	cmds = m.On(&machine.Ctx{Now: 20, Trace: machine.Discard}, configpush.Restarted{})
	for _, c := range cmds {
		_, write := c.(configpush.WriteFiles)
		require.False(t, write, "nothing of the push is written")
		if o, ok := c.(configpush.Outcome); ok {
			require.Contains(t, o.FilesErr, configpush.ErrFilesChanged.Error())
		}
	}
}
