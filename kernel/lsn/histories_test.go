package lsn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/lsn"
)

func TestHistoriesOneRowPerEndpoint(t *testing.T) {
	hs := lsn.NewHistories(0)
	require.Equal(t, lsn.DefaultWindow, hs.Window())
	a := lsn.Endpoint{Host: "10.0.0.2", Port: 5432}
	b := lsn.Endpoint{Host: "10.0.0.1", Port: 5433}
	c := lsn.Endpoint{Host: "10.0.0.1", Port: 5432}
	require.NoError(t, hs.Record(a, lsn.Observed(1, 0x16_B374D848)))
	require.NoError(t, hs.Record(b, lsn.Unknown(1)))
	require.NoError(t, hs.Record(c, lsn.Observed(1, 5)))
	require.NoError(t, hs.Record(c, lsn.Observed(2, 6)))
	err := hs.Record(c, lsn.Observed(2, 7))
	require.ErrorIs(t, err, lsn.ErrOutOfOrder)
	require.ErrorContains(t, err, "10.0.0.1:5432")
	rows := hs.Rows()
	require.Equal(t, []lsn.Row{
		{Endpoint: c, LSN: 6, Known: true},
		{Endpoint: b},
		{Endpoint: a, LSN: 0x16_B374D848, Known: true},
	}, rows)
	require.Equal(t, "10.0.0.2\t5432\t16/B374D848", rows[2].String())
	require.Equal(t, "10.0.0.1\t5433\tNULL", rows[1].String())
	require.True(t, hs.Reached(a, 0x16_B374D848))
	require.False(t, hs.Reached(b, 0))
	require.False(t, hs.Reached(lsn.Endpoint{Host: "nowhere"}, 0))
	_, ok := hs.After(lsn.Endpoint{Host: "nowhere"}, 0)
	require.False(t, ok)
	s, ok := hs.After(c, 1)
	require.True(t, ok)
	require.Equal(t, lsn.LSN(6), s.LSN)

	cl := hs.Clone()
	require.NoError(t, hs.Record(c, lsn.Observed(3, 9)))
	require.True(t, hs.Reached(c, 9))
	require.False(t, cl.Reached(c, 9), "a clone does not see later samples")
	hs.Forget(c)
	require.Nil(t, hs.Get(c))
	require.Equal(t, 2, hs.Len())
	require.Equal(t, 3, cl.Len())
}
