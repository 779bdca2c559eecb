package refrouter_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/refrouter"
)

// TestFleetIsTheConfigTarget: the fleet writes a generation into every instance's
// directory, reachable or not, without reloading any; a restarted instance comes back on
// it, Apply of the same generation is a no-op write, and a generation older than the one
// in place is refused everywhere. No server is needed: pools connect only for statements.
func TestFleetIsTheConfigTarget(t *testing.T) {
	rec := func(g uint64, n int) *shardmap.Record {
		r := shardmap.NewPgHash("app", shardmap.Key{Column: "id", Type: shardmap.Bigint, Tables: []string{"t"}}, backends(n)...)
		r.Generation = g
		return r
	}
	root := t.TempDir()
	f, err := refrouter.OpenFleet(refrouter.FleetOptions{Root: root, N: 3, Database: "app", User: appRole, Files: renderPgDog(t, rec(1, 2)), Generation: 1})
	require.NoError(t, err)
	defer f.Close()
	ctx := context.Background()
	gens := func() (loaded, inDir []uint64) {
		for _, r := range f.Routers() {
			g, known := r.Generation()
			require.True(t, known)
			loaded = append(loaded, g)
			top, err := refrouter.ReadDir(filepath.Join(root, r.ID()))
			require.NoError(t, err)
			g, known = top.Generation("app")
			require.True(t, known)
			inDir = append(inDir, g)
		}
		return loaded, inDir
	}
	loaded, inDir := gens()
	require.Equal(t, []uint64{1, 1, 1}, loaded)
	require.Equal(t, []uint64{1, 1, 1}, inDir)

	f.Router("ref-3").SetUnreachable(true)
	g2 := renderPgDog(t, rec(2, 3))
	require.NoError(t, f.WriteFiles(ctx, 2, g2))
	loaded, inDir = gens()
	require.Equal(t, []uint64{1, 1, 1}, loaded, "writing the files reloads nothing")
	require.Equal(t, []uint64{2, 2, 2}, inDir, "every directory has the generation, the unreachable instance's too")

	a, err := f.Router("ref-1").Apply(ctx, 2, g2)
	require.NoError(t, err, "Apply writes the generation in place again: the same files")
	require.Equal(t, uint64(2), a.Generation)
	require.NoError(t, f.Restart(ctx, "ref-3"))
	loaded, _ = gens()
	require.Equal(t, []uint64{2, 1, 2}, loaded, "ref-1 reloaded, ref-3 restarted on the files, ref-2 was told nothing")

	err = f.WriteFiles(ctx, 1, renderPgDog(t, rec(1, 2)))
	require.ErrorIs(t, err, adapters.ErrNewerGeneration)
	_, err = f.Router("ref-2").Apply(ctx, 1, renderPgDog(t, rec(1, 2)))
	require.ErrorIs(t, err, adapters.ErrNewerGeneration, "Apply of an older generation is refused before reloading")
	loaded, inDir = gens()
	require.Equal(t, []uint64{2, 1, 2}, loaded)
	require.Equal(t, []uint64{2, 2, 2}, inDir)
}
