package driver_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters/configmap"
	"loam.dev/router/adapters/memstore"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
	"loam.dev/router/machine/configpush"
)

// pushWith is push with a users.toml carrying password, as the daemon renders it.
func pushWith(gen uint64, ids []string, password string) configpush.Push {
	rec := &shardmap.Record{Version: 3, Generation: gen, Router: shardmap.Router{Kind: shardmap.PgDog, Name: "app"}}
	files, err := render.NewFiles(render.File{Name: "pgdog.toml", Data: []byte("# rendered\n")},
		render.File{Name: "users.toml", Data: []byte("[[users]]\nname = \"app\"\npassword = \"" + password + "\"\n")})
	if err != nil {
		panic(err)
	}
	return configpush.Push{Record: rec, Generation: gen, Files: files, Instances: ids}
}

// bothHandlers is a text and a JSON handler at debug level, writing to one buffer each.
func bothHandlers() (*slog.Logger, *slog.Logger, *bytes.Buffer, *bytes.Buffer) {
	var tb, jb bytes.Buffer
	opts := &slog.HandlerOptions{Level: slog.LevelDebug}
	return slog.New(slog.NewTextHandler(&tb, opts)), slog.New(slog.NewJSONHandler(&jb, opts)), &tb, &jb
}

// TestNoPasswordInALog: the commands and inputs that carry the routers' files log their
// names and digest, never their bytes, through the text and the JSON handler at debug level
// (directly, nested in a group, and as %v), and a whole push through the driver logs no
// password either, nor leaves one in the snapshot it saves in the store.
func TestNoPasswordInALog(t *testing.T) {
	const pw = "s3cret-Passw0rd"
	p := pushWith(4, []string{"pgdog-0"}, pw)
	text, js, tb, jb := bothHandlers()
	values := []any{
		p, p.Files,
		configpush.WriteFiles{Step: "g4/files", Attempt: 1, Generation: 4, Files: p.Files},
		configpush.Reload{Step: "g4/reload/pgdog-0", Attempt: 1, Instance: "pgdog-0", Generation: 4, Files: p.Files},
	}
	for _, l := range []*slog.Logger{text, js} {
		for _, v := range values {
			l.Debug("value", "v", v)
			l.Debug("group", slog.Group("g", slog.Any("v", v)))
			l.Debug("printed", "v", fmtV(v))
		}
	}
	require.NotEmpty(t, tb.String())
	require.NotEmpty(t, jb.String())
	require.NotContains(t, tb.String(), pw)
	require.NotContains(t, jb.String(), pw)
	require.Contains(t, tb.String(), p.Files.Digest(), "the files are named by their digest")

	// A whole push, logged at debug level by the driver and the executor.
	insts, _, ids := fakeInstances(2, 0)
	for _, l := range []*slog.Logger{text, js} {
		store := memstore.New()
		exec := &driver.ConfigPushExecutor{Target: &fakeTarget{}, Instance: driver.Lookup(insts), Logger: l}
		require.NoError(t, driver.Run(context.Background(), driver.ConfigPush(exec, configpush.Options{}),
			driver.Config[configpush.Input]{ID: "ns/app", Store: store, Logger: l, Trace: machine.Discard}, configpush.Input(pushWith(4, ids, pw))))
		b, err := store.GetBlob(context.Background(), driver.SnapshotKey("configpush", "ns/app"))
		require.NoError(t, err)
		require.NotContains(t, string(b.Data), pw, "the snapshot in the store")
		require.NotContains(t, string(b.Data), "users.toml", "the snapshot keeps a digest, not the files")
	}
	require.NotContains(t, tb.String(), pw)
	require.NotContains(t, jb.String(), pw)
}

// fmtV is v as %+v prints it (what a handler shows for a value it knows nothing of).
func fmtV(v any) string { return fmt.Sprintf("%+v", v) }

// TestPasswordRotationReachesTheRouters: the same generation rendered with a rotated
// password is written again (users.toml holds the new password, 0600 in a 0700 directory)
// and every instance is reloaded again, after the controller restarted with the new
// secret, as the daemon does when its environment changes.
func TestPasswordRotationReachesTheRouters(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "files")
	target, err := configmap.NewDir(dir)
	require.NoError(t, err)
	insts, fakes, ids := fakeInstances(3, 0)
	store := memstore.New()
	cfg := driver.Config[configpush.Input]{ID: "ns/app", Store: store, Logger: quiet, Trace: machine.Discard}
	run := func(password string) {
		exec := &driver.ConfigPushExecutor{Target: target, Instance: driver.Lookup(insts), Logger: quiet}
		p := pushWith(4, ids, password)
		rerender := func() (*shardmap.Record, render.Files, error) { return p.Record, p.Files, nil }
		require.NoError(t, driver.Run(context.Background(), driver.ConfigPushRendered(exec, configpush.Options{}, rerender), cfg, configpush.Input(p)))
	}
	users := func() string {
		b, err := os.ReadFile(filepath.Join(dir, "users.toml"))
		require.NoError(t, err)
		return string(b)
	}
	run("old-password")
	require.Contains(t, users(), "old-password")
	run("old-password") // the same files again: nothing written, nobody reloaded
	for _, f := range fakes {
		require.Equal(t, 1, f.applied, f.id)
	}

	run("new-password")
	require.Contains(t, users(), "new-password")
	require.NotContains(t, users(), "old-password")
	for _, f := range fakes {
		require.Equal(t, 2, f.applied, "%s: reloaded with the rotated password", f.id)
	}
	st, err := os.Stat(filepath.Join(dir, "users.toml"))
	require.NoError(t, err)
	require.Equal(t, configmap.FileMode, st.Mode().Perm(), "users.toml")
	real, err := filepath.EvalSymlinks(filepath.Join(dir, "users.toml"))
	require.NoError(t, err)
	st, err = os.Stat(filepath.Dir(real))
	require.NoError(t, err)
	require.Equal(t, configmap.DirMode, st.Mode().Perm(), "the generation's directory")
	s := snapshotOf(t, store, "ns/app")
	require.True(t, s.Push.Done)
	require.Len(t, s.Push.Instances, 3)
	for _, in := range s.Push.Instances {
		require.Equal(t, configpush.StageConfirmed, in.Stage, in.ID)
	}
}
