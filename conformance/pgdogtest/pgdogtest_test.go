package pgdogtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
)

type fakeT struct{ skipped string }

func (f *fakeT) Helper()          {}
func (f *fakeT) Skip(args ...any) { f.skipped = args[0].(string) }

// TestRequireSkipsEvenUnderRequireReal: CI sets LOAM_REQUIRE_REAL=1 and cannot build PgDog,
// so a missing binary is a skip there too, with the message the skip count looks for.
func TestRequireSkipsEvenUnderRequireReal(t *testing.T) {
	t.Setenv("LOAM_REQUIRE_REAL", "1")
	for name, val := range map[string]string{"unset": "", "missing": filepath.Join(t.TempDir(), "pgdog"), "directory": t.TempDir()} {
		t.Setenv(EnvBin, val)
		var f fakeT
		require.Empty(t, requireBin(&f), name)
		require.True(t, strings.HasPrefix(f.skipped, "skipped: needs pgdog (LOAM_PGDOG_BIN)"), "%s: %q", name, f.skipped)
	}
	exe := filepath.Join(t.TempDir(), "pgdog")
	require.NoError(t, os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755))
	t.Setenv(EnvBin, exe)
	var f fakeT
	require.Equal(t, exe, requireBin(&f))
	require.Empty(t, f.skipped)
}

// TestStartServesAdmin starts a real PgDog on rendered files and logs in to its admin
// database; it skips without LOAM_PGDOG_BIN.
func TestStartServesAdmin(t *testing.T) {
	rec := shardmap.NewPgHash("app", shardmap.Key{Column: "id", Type: shardmap.Bigint, Tables: []string{"t"}},
		shardmap.Backend{Host: "127.0.0.1", Port: 1, Database: "app"})
	rec.Generation = 3
	fs, err := render.PgDog(rec, render.Credentials{Users: []render.User{{Name: "app", Password: "p"}}, Admin: render.Admin{Password: "admin-secret"}},
		render.PgDogOptions{TLS: render.TLS{Insecure: true}})
	require.NoError(t, err)
	i := Start(t, 3, fs)
	ctx := context.Background()
	pc, err := pgconn.Connect(ctx, i.AdminDSN("admin-secret"))
	require.NoError(t, err, i.LogTail())
	res, err := pc.Exec(ctx, "SHOW VERSION").ReadAll()
	require.NoError(t, err)
	require.Contains(t, string(res[0].Rows[0][0]), "PgDog")
	pc.Close(ctx)
	_, err = pgconn.Connect(ctx, i.AdminDSN("wrong"))
	require.Error(t, err, "the admin database is behind its password")
	i.Restart(t)
	pc, err = pgconn.Connect(ctx, i.AdminDSN("admin-secret"))
	require.NoError(t, err, i.LogTail())
	pc.Close(ctx)
}
