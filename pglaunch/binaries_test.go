package pglaunch

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHighestVersionBinDir picks the highest complete installation.
func TestHighestVersionBinDir(t *testing.T) {
	root := t.TempDir()
	install := func(version string, programs ...string) {
		dir := filepath.Join(root, version, "bin")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		for _, p := range programs {
			require.NoError(t, os.WriteFile(filepath.Join(dir, p), nil, 0o755))
		}
	}
	install("9.6", requiredBinaries...)
	install("15", requiredBinaries...)
	install("17", "initdb", "postgres") // no pg_basebackup: incomplete
	require.NoError(t, os.MkdirAll(filepath.Join(root, "notaversion", "bin"), 0o755))
	got, err := highestVersionBinDir(root)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(root, "15", "bin"), got)

	_, err = highestVersionBinDir(filepath.Join(root, "absent"))
	require.True(t, errors.Is(err, ErrNoBinaries), "%v", err)
}
