package vindex

import (
	"bufio"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVitessVectors checks every row of testdata/vitess_vindex.tsv (computed by Vitess
// v0.24.4's own vindexes; Apache-2.0, The Vitess Authors) against this package.
func TestVitessVectors(t *testing.T) {
	f, err := os.Open("testdata/vitess_vindex.tsv")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	header := true
	rows := map[string]int{}
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if strings.HasPrefix(text, "#") || text == "" {
			continue
		}
		fields := strings.Split(text, "\t")
		require.Len(t, fields, 4, "line %d: %q", line, text)
		if header {
			require.Equal(t, []string{"vindex", "input_type", "input", "keyspace_id_hex"}, fields)
			header = false
			continue
		}
		vindex, typ, input, want := fields[0], fields[1], fields[2], fields[3]
		rows[vindex+"/"+typ]++
		got, ok := vectorKeyspaceID(t, vindex, typ, input)
		at := "line " + strconv.Itoa(line) + ": " + text
		if want == "none" {
			require.False(t, ok, at)
			continue
		}
		require.True(t, ok, at)
		require.Equal(t, want, hex.EncodeToString(got[:]), at)
		if vindex == "hash" {
			ksid, err := hex.DecodeString(want)
			require.NoError(t, err)
			back, err := UnhashBytes(ksid)
			require.NoError(t, err)
			num, err := ParseUint64(input)
			if typ == "int64" {
				var s int64
				s, err = strconv.ParseInt(input, 10, 64)
				num = uint64(s)
			}
			require.NoError(t, err, at)
			require.Equal(t, num, back, "reverse map, "+at)
		}
	}
	require.NoError(t, sc.Err())
	// The file's composition, so that a truncated copy cannot pass quietly.
	require.Equal(t, map[string]int{
		"hash/int64": 18, "hash/null": 1, "hash/uint64": 74, "hash/varchar": 8,
		"xxhash/bytes_hex": 50, "xxhash/int64": 12, "xxhash/null": 1, "xxhash/uint64": 65, "xxhash/varchar": 10,
	}, rows)
}

// vectorKeyspaceID computes a vector row's keyspace ID the way a caller of this package would
// for that SQL type; ok is false where Vitess gives no keyspace ID.
func vectorKeyspaceID(t *testing.T, vindex, typ, input string) (ksid [8]byte, ok bool) {
	t.Helper()
	switch vindex + "/" + typ {
	case "hash/int64":
		v, err := strconv.ParseInt(input, 10, 64)
		require.NoError(t, err)
		return Hash(uint64(v)), true
	case "hash/uint64", "hash/varchar":
		k, err := HashText(input)
		if err != nil {
			require.ErrorIs(t, err, ErrNotUint64)
			return ksid, false
		}
		return k, true
	case "hash/null":
		return ksid, false // NULL has no number, hence no keyspace ID
	case "xxhash/int64":
		v, err := strconv.ParseInt(input, 10, 64)
		require.NoError(t, err)
		return XXHashInt64(v), true
	case "xxhash/uint64":
		v, err := strconv.ParseUint(input, 10, 64)
		require.NoError(t, err)
		return XXHashUint64(v), true
	case "xxhash/varchar":
		return XXHashString(input), true
	case "xxhash/bytes_hex":
		b, err := hex.DecodeString(input)
		require.NoError(t, err)
		return XXHash(b), true
	case "xxhash/null":
		return XXHash(nil), true
	}
	t.Fatalf("vector of unknown kind %s/%s", vindex, typ)
	return ksid, false
}
