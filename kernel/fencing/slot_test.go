package fencing_test

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/fencing"
)

// TestSlotVectors checks Slot against slots a real cluster reported (testdata/keyslot.tsv).
func TestSlotVectors(t *testing.T) {
	f, err := os.Open("testdata/keyslot.tsv")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, slot, ok := strings.Cut(line, "\t")
		require.True(t, ok, line)
		want, err := strconv.Atoi(slot)
		require.NoError(t, err)
		require.Equal(t, uint16(want), fencing.Slot(key), "slot of %q", key)
		n++
	}
	require.NoError(t, sc.Err())
	require.GreaterOrEqual(t, n, 7)
}

func TestHashTag(t *testing.T) {
	for key, tag := range map[string]string{
		"plain":             "plain",
		"a{b}c":             "b",
		"a{}c{d}":           "a{}c{d}", // empty first tag: whole key
		"a{b":               "a{b",
		"{a}b:s}:lease":     "a",
		"x{{y}}":            "{y",
		"buzz:tunnel:{a:b}": "a:b",
	} {
		require.Equal(t, tag, fencing.HashTag(key), key)
	}
}

func BenchmarkSlot(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		fencing.Slot("buzz:tunnel:{acme:sess42}:generation")
	}
}
