package lsn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/lsn"
)

func TestInsertProgress(t *testing.T) {
	w := lsn.DefaultWAL
	require.NoError(t, w.Validate())
	cases := []struct{ in, want string }{
		{"0/3000028", "0/3000000"},   // first page of segment 3: long header (40 bytes)
		{"0/3002018", "0/3002000"},   // second page of the segment: short header (24 bytes)
		{"1/FF000028", "1/FF000000"}, // segment start in a high half
		{"0/3000018", "0/3000018"},   // 24 past a segment start is inside the long header: unchanged
		{"0/3002028", "0/3002028"},   // 40 past an ordinary page is a real position
		{"0/3013290", "0/3013290"},   // ordinary insert position
		{"0/3000000", "0/3000000"},   // already a boundary
	}
	for _, c := range cases {
		require.Equal(t, c.want, w.InsertProgress(lsn.MustParse(c.in)).String(), c.in)
	}
	big := lsn.WALLayout{BlockSize: 32768, SegmentSize: 1 << 30}
	require.NoError(t, big.Validate())
	require.Equal(t, "0/8000", big.InsertProgress(lsn.MustParse("0/8018")).String())
	require.Equal(t, "0/2018", big.InsertProgress(lsn.MustParse("0/2018")).String(), "8 kB pages do not exist in a 32 kB layout")
}

func TestWALLayoutValidate(t *testing.T) {
	for _, w := range []lsn.WALLayout{{}, {8192, 0}, {8000, 16 << 20}, {8192, 3 << 20}, {16 << 20, 8192}, {32, 1 << 20}} {
		require.ErrorIs(t, w.Validate(), lsn.ErrLayout, "%+v", w)
	}
}
