package pghash

import (
	"bufio"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readVectors yields the data rows of a vector file after checking its header line; the
// comment lines at its top name the Postgres server and the queries that produced it.
func readVectors(t *testing.T, path string, header ...string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var rows [][]string
	sc := bufio.NewScanner(f)
	seenHeader := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Split(line, "\t")
		if !seenHeader {
			require.Equal(t, header, fields, "%s: header", path)
			seenHeader = true
			continue
		}
		require.Len(t, fields, len(header), "%s: %q", path, line)
		rows = append(rows, fields)
	}
	require.NoError(t, sc.Err())
	return rows
}

// TestHashExtendedVectors: every row of pg_hashextended.tsv (Postgres 15.18's own
// hashint8extended, hashint4extended, hashint2extended, hashtextextended, uuid_hash_extended
// and hashvarlenaextended over edge inputs and six seeds).
func TestHashExtendedVectors(t *testing.T) {
	rows := readVectors(t, "testdata/pg_hashextended.tsv", "type", "input", "seed", "hash")
	count := map[string]int{}
	for _, r := range rows {
		typ, input := r[0], r[1]
		seed, err := strconv.ParseInt(r[2], 10, 64)
		require.NoError(t, err)
		want, err := strconv.ParseInt(r[3], 10, 64)
		require.NoError(t, err)
		s := uint64(seed)
		var got uint64
		switch typ {
		case "int8":
			v, err := strconv.ParseInt(input, 10, 64)
			require.NoError(t, err)
			got = HashInt8Extended(v, s)
		case "int4":
			v, err := strconv.ParseInt(input, 10, 32)
			require.NoError(t, err)
			got = HashInt4Extended(int32(v), s)
			require.Equal(t, got, HashInt8Extended(v, s), "int4 %d hashes like int8", v)
		case "int2":
			v, err := strconv.ParseInt(input, 10, 16)
			require.NoError(t, err)
			got = HashInt2Extended(int16(v), s)
			require.Equal(t, got, HashInt8Extended(v, s), "int2 %d hashes like int8", v)
		case "text":
			got = HashTextExtended(input, s)
			require.Equal(t, got, HashBytesExtended([]byte(input), s))
		case "uuid":
			u, err := ParseUUID(input)
			require.NoError(t, err)
			require.Equal(t, input, FormatUUID(u))
			got = HashUUIDExtended(u, s)
		case "bytea":
			require.True(t, strings.HasPrefix(input, `\x`), input)
			b, err := hex.DecodeString(input[2:])
			require.NoError(t, err)
			got = HashBytesExtended(b, s)
		default:
			t.Fatalf("unknown type %q", typ)
		}
		require.Equal(t, want, int64(got), "%s(%q, %d)", typ, input, seed)
		count[typ]++
	}
	require.Equal(t, map[string]int{"int8": 252, "int4": 144, "int2": 78, "text": 240, "uuid": 96, "bytea": 120}, count)
}

// TestPartitionVectors: every row of pg_hash_partition.tsv, where the remainder is the
// partition an INSERT into a real PARTITION BY HASH table routed the row to.
func TestPartitionVectors(t *testing.T) {
	rows := readVectors(t, "testdata/pg_hash_partition.tsv", "type", "input", "modulus", "remainder")
	count := map[string]int{}
	for _, r := range rows {
		typ, input := r[0], r[1]
		modulus, err := strconv.ParseUint(r[2], 10, 64)
		require.NoError(t, err)
		want, err := strconv.ParseUint(r[3], 10, 64)
		require.NoError(t, err)
		var got uint64
		var row Row
		switch typ {
		case "int8":
			v, err := strconv.ParseInt(input, 10, 64)
			require.NoError(t, err)
			got = ShardOfInt8(v, modulus)
			row.Int8(v)
		case "int4":
			v, err := strconv.ParseInt(input, 10, 32)
			require.NoError(t, err)
			got = ShardOfInt4(int32(v), modulus)
			row.Int4(int32(v))
		case "text":
			got = ShardOfText(input, modulus)
			row.Text(input)
		case "uuid":
			u, err := ParseUUID(input)
			require.NoError(t, err)
			got = ShardOfUUID(u, modulus)
			row.UUID(u)
		default:
			t.Fatalf("unknown type %q", typ)
		}
		at := typ + " " + input + " mod " + r[2]
		require.Equal(t, want, got, at)
		require.Equal(t, want, row.Remainder(modulus), "Row, "+at)
		pt, err := ParseType(typ)
		require.NoError(t, err)
		byKey, err := ShardOfKey(pt, input, modulus)
		require.NoError(t, err)
		require.Equal(t, want, byKey, "ShardOfKey, "+at)
		count[typ]++
	}
	require.Equal(t, map[string]int{"int8": 1200, "int4": 1200, "text": 1200, "uuid": 1200}, count)
}

// TestWorkedExamples are the rows of the reference's worked-example table, including the
// row hashes that need an unsigned modulo.
func TestWorkedExamples(t *testing.T) {
	u, err := ParseUUID("123e4567-e89b-12d3-a456-426614174000")
	require.NoError(t, err)
	for _, c := range []struct {
		name    string
		h       uint64
		rowHash uint64
		rems    [6]uint64 // moduli 2, 3, 4, 5, 8, 16
	}{
		{"int8 1", HashInt8Extended(1, HashPartitionSeed), 0x9c7715e2970a8fb8, [6]uint64{0, 2, 0, 0, 0, 8}},
		{"int8 -1", HashInt8Extended(-1, HashPartitionSeed), 0x0400bc251f3bafa5, [6]uint64{1, 2, 1, 4, 5, 5}},
		{"text abc", HashTextExtended("abc", HashPartitionSeed), 0x7bfcf7ae85298aa5, [6]uint64{1, 1, 1, 3, 5, 5}},
		{"uuid", HashUUIDExtended(u, HashPartitionSeed), 0x38407cd05ad87385, [6]uint64{1, 1, 1, 1, 5, 5}},
	} {
		var r Row
		r.Column(c.h)
		require.Equal(t, c.rowHash, r.Hash(), c.name)
		for i, m := range []uint64{2, 3, 4, 5, 8, 16} {
			require.Equal(t, c.rems[i], r.Remainder(m), "%s mod %d", c.name, m)
		}
	}
	require.Equal(t, int64(5968994663651403477), int64(HashInt8Extended(1, HashPartitionSeed)))
	require.Equal(t, int64(-1252132692482143582), int64(HashUUIDExtended(u, HashPartitionSeed)))
}

// TestPartitionState: the precomputed seeded state is the seeding of HashPartitionSeed.
func TestPartitionState(t *testing.T) {
	a, b, c := start(4, HashPartitionSeed)
	require.Equal(t, [3]uint32{a, b, c}, [3]uint32{partitionA, partitionB, partitionC})
}

// TestVectorsCatchSignedModulo shows the partition vectors trip the classic mistake, a
// signed 64-bit modulo of the row hash (the mutant the unsigned % in ShardOf* avoids): for
// about half of all keys the row hash is 2^63 or more and the signed remainder differs or is
// negative.
func TestVectorsCatchSignedModulo(t *testing.T) {
	rows := readVectors(t, "testdata/pg_hash_partition.tsv", "type", "input", "modulus", "remainder")
	caught := 0
	for _, r := range rows {
		if r[0] != "text" {
			continue
		}
		m, _ := strconv.ParseInt(r[2], 10, 64)
		want, _ := strconv.ParseInt(r[3], 10, 64)
		var row Row
		row.Text(r[1])
		if int64(row.Hash())%m != want {
			caught++
		}
	}
	require.Greater(t, caught, 100, "the signed-modulo mutant would pass the text vectors")
}
