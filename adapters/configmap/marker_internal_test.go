package configmap

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParseMarker: the marker decoder never panics, and accepts exactly what formatMarker
// writes: one spelling per generation.
func FuzzParseMarker(f *testing.F) {
	for _, s := range []string{"1\n", "18446744073709551615\n", "0\n", "01\n", "1", "", "-1\n", "1\n\n", "18446744073709551616\n", " 1\n", "+1\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := parseMarker(b)
		if err != nil {
			return
		}
		require.NotZero(t, g)
		require.Equal(t, string(formatMarker(g)), string(b))
	})
}

func TestParseMarker(t *testing.T) {
	for _, ok := range []uint64{1, 9, 10, 1 << 63, ^uint64(0)} {
		g, err := parseMarker(formatMarker(ok))
		require.NoError(t, err)
		require.Equal(t, ok, g)
	}
	for _, bad := range []string{"0\n", "01\n", "1", "", "-1\n", "1\n\n", "18446744073709551616\n", " 1\n", "+1\n", "1 \n"} {
		_, err := parseMarker([]byte(bad))
		require.Error(t, err, "%q", bad)
	}
}
