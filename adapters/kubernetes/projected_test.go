package kubernetes_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters/kubernetes"
)

// TestVisibleGeneration: a pod sees the lower of the ConfigMap's and the Secret's
// generation keys, 0 before anything of Loam's is projected, and a clear error for a key
// it cannot read as a generation.
func TestVisibleGeneration(t *testing.T) {
	dir := t.TempDir()
	g, err := kubernetes.VisibleGeneration(dir)
	require.NoError(t, err)
	require.Zero(t, g)
	write := func(name, v string) { require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644)) }
	write(kubernetes.GenerationKey, "7\n")
	g, err = kubernetes.VisibleGeneration(dir)
	require.NoError(t, err)
	require.Equal(t, uint64(7), g, "no Secret key: the ConfigMap's")
	write(kubernetes.SecretGenerationKey, "6\n")
	g, err = kubernetes.VisibleGeneration(dir)
	require.NoError(t, err)
	require.Equal(t, uint64(6), g, "the Secret trails: the pod sees generation 6's credentials")
	write(kubernetes.SecretGenerationKey, "8\n")
	g, err = kubernetes.VisibleGeneration(dir)
	require.NoError(t, err)
	require.Equal(t, uint64(7), g)
	for _, bad := range []string{"", "7", "07\n", "-1\n", "0\n", "7 \n", "x\n", "18446744073709551616\n"} {
		write(kubernetes.GenerationKey, bad)
		_, err = kubernetes.VisibleGeneration(dir)
		require.ErrorContains(t, err, "not a generation", "%q", bad)
		require.ErrorContains(t, err, kubernetes.GenerationKey)
	}
}

// FuzzParseMarker: an accepted marker is exactly what the Target writes for its value.
func FuzzParseMarker(f *testing.F) {
	for _, s := range []string{"1\n", "42\n", "0\n", "01\n", "1", "", "18446744073709551615\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := kubernetes.ParseMarker(b)
		if err != nil {
			return
		}
		if want := strconv.FormatUint(g, 10) + "\n"; string(b) != want || g == 0 {
			t.Fatalf("accepted %q as %d, which is written %q", b, g, want)
		}
	})
}
