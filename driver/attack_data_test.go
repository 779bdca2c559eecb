package driver_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters/memstore"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/render"
	"loam.dev/router/machine"
	"loam.dev/router/machine/configpush"
)

// TestAttackSnapshotInjection: someone who can write the store plants a configpush
// snapshot whose push, in flight, carries files that let anyone in (auth_type = "trust")
// with their digest. The controller restores it, renders the files again from the record
// and its own secrets, finds another digest, and writes and reloads nothing: the push ends
// with configpush.ErrFilesChanged in its Outcome, logged as an error.
func TestAttackSnapshotInjection(t *testing.T) {
	forged, err := render.NewFiles(render.File{Name: "pgdog.toml", Data: []byte("[general]\nauth_type = \"trust\"\n")},
		render.File{Name: "users.toml", Data: []byte("[[users]]\nname = \"app\"\npassword = \"\"\n")})
	require.NoError(t, err)
	type forgedProgress struct {
		configpush.Progress
		Files render.Files `json:"files"` // what an older snapshot format carried
	}
	snap := struct {
		Database string          `json:"database"`
		Push     *forgedProgress `json:"push"`
	}{Database: "app", Push: &forgedProgress{Progress: configpush.Progress{
		Generation: 4, Version: 3, Digest: forged.Digest(),
		FilesStep: configpush.Step{State: configpush.StepAwaiting, Attempt: 1, Limit: 5, At: 1},
		Instances: []configpush.Instance{{ID: "pgdog-0", Stage: configpush.StageFiles}, {ID: "pgdog-1", Stage: configpush.StageFiles}},
	}, Files: forged}}
	data, err := json.Marshal(snap)
	require.NoError(t, err)
	store := memstore.New()
	_, err = store.PutBlob(context.Background(), driver.SnapshotKey("configpush", "ns/app"), 0, data)
	require.NoError(t, err)

	insts, fakes, _ := fakeInstances(2, 0)
	target := &fakeTarget{}
	text, _, tb, _ := bothHandlers()
	var outcome configpush.Outcome
	exec := &driver.ConfigPushExecutor{Target: target, Instance: driver.Lookup(insts), Logger: text,
		OnOutcome: func(o configpush.Outcome) { outcome = o }}
	require.NoError(t, driver.Run(context.Background(), driver.ConfigPushRendered(exec, configpush.Options{}, rerender(4)),
		driver.Config[configpush.Input]{ID: "ns/app", Store: store, Logger: text, Trace: machine.Discard}))

	require.Zero(t, target.writes, "no files were written")
	for _, f := range fakes {
		require.Zero(t, f.calls, "%s was not reloaded", f.id)
	}
	require.Contains(t, outcome.FilesErr, configpush.ErrFilesChanged.Error())
	require.Contains(t, tb.String(), "level=ERROR")
	require.Contains(t, tb.String(), "do not match the snapshot's digest")
	for _, line := range strings.Split(tb.String(), "\n") {
		require.NotContains(t, line, "trust", "the forged files are never read, let alone logged")
	}
	s := snapshotOf(t, store, "ns/app")
	require.True(t, s.Push.Done)
	require.Nil(t, s.Push.Files)

	// The daemon's next push writes the files of the record and its own secrets.
	exec.Logger = quiet
	require.NoError(t, driver.Run(context.Background(), driver.ConfigPushRendered(exec, configpush.Options{}, rerender(4)),
		driver.Config[configpush.Input]{ID: "ns/app", Store: store, Logger: quiet, Trace: machine.Discard}, push(4, []string{"pgdog-0", "pgdog-1"})))
	require.Equal(t, 1, target.writes)
	require.Equal(t, []string{"pgdog-0", "pgdog-1"}, outcome.Confirmed)
}
