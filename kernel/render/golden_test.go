package render

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ from the current output")

// TestGolden compares every golden case byte for byte with testdata/<case>/<file>, and
// fails on a file rendered but not in testdata or the other way round.
// `go test ./kernel/render -run TestGolden -update` rewrites them.
func TestGolden(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			files, err := c.render()
			require.NoError(t, err)
			dir := filepath.Join("testdata", c.name)
			if *update {
				require.NoError(t, os.RemoveAll(dir))
				require.NoError(t, os.MkdirAll(dir, 0o755))
				for _, f := range files {
					require.NoError(t, os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644))
				}
			}
			entries, err := os.ReadDir(dir)
			require.NoError(t, err, "no golden files; run with -update")
			var onDisk []string
			for _, e := range entries {
				onDisk = append(onDisk, e.Name())
			}
			slices.Sort(onDisk)
			require.Equal(t, onDisk, files.Names(), "rendered file set differs from %s", dir)
			for _, f := range files {
				want, err := os.ReadFile(filepath.Join(dir, f.Name))
				require.NoError(t, err)
				require.Equal(t, string(want), string(f.Data), "%s/%s differs from the golden file; if the change is intended, run with -update and review the diff", dir, f.Name)
			}
		})
	}
}

// TestDeterministic renders every case twice and once with the users in reverse order:
// the bytes must not change, because rendered generations are compared by content.
func TestDeterministic(t *testing.T) {
	for _, c := range goldenCases {
		a, err := c.render()
		require.NoError(t, err)
		b, err := c.render()
		require.NoError(t, err)
		require.Equal(t, a, b, c.name)
	}
	cr := creds()
	slices.Reverse(cr.Users)
	a, err := PgDog(listRecord(), creds(), PgDogOptions{TLS: tlsOpts()})
	require.NoError(t, err)
	b, err := PgDog(listRecord(), cr, PgDogOptions{TLS: tlsOpts()})
	require.NoError(t, err)
	require.Equal(t, a, b, "user order in the input must not change the output")
	va, err := Vitess(vitessRecord(), creds(), VitessOptions{})
	require.NoError(t, err)
	vb, err := Vitess(vitessRecord(), cr, VitessOptions{})
	require.NoError(t, err)
	require.Equal(t, va, vb)
}
