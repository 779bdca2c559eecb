package mysql_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	mysqlad "loam.dev/router/adapters/mysql"
)

func TestParseRecoverRow(t *testing.T) {
	x, err := mysqlad.ParseRecoverRow(1, 41, 0, []byte("__pgdog_2pc_node-1_11831846541046318210_0"))
	require.NoError(t, err)
	require.Equal(t, "__pgdog_2pc_node-1_11831846541046318210_0", x.GID(), "XA START 'gid': the gid verbatim")
	x, err = mysqlad.ParseRecoverRow(7, 7, 2, []byte("gtrid-1bq"))
	require.NoError(t, err)
	require.Equal(t, mysqlad.XID{FormatID: 7, Gtrid: []byte("gtrid-1"), Bqual: []byte("bq")}, x)
	require.Equal(t, "X'67747269642d31',X'6271',7", x.GID(), "a bqual or another format: the SQL form XA COMMIT takes")
	x, err = mysqlad.ParseRecoverRow(2, 3, 0, []byte("abc"))
	require.NoError(t, err)
	require.Equal(t, "X'616263',X'',2", x.GID())
	for _, bad := range []struct {
		g, b int64
		data string
	}{{3, 0, "ab"}, {1, 1, "abc"}, {-1, 3, "ab"}, {65, 0, string(make([]byte, 65))}, {0, 65, string(make([]byte, 65))}} {
		_, err := mysqlad.ParseRecoverRow(1, bad.g, bad.b, []byte(bad.data))
		require.Error(t, err, "%+v", bad)
	}
}

// FuzzParseRecoverRow: a row that parses splits its data exactly, and its gid names it: the
// gtrid itself for a plain branch, else the SQL form.
func FuzzParseRecoverRow(f *testing.F) {
	f.Add(int64(1), int64(3), int64(0), []byte("abc"))
	f.Add(int64(7), int64(1), int64(2), []byte("abc"))
	f.Add(int64(1), int64(4), int64(0), []byte("abc"))
	f.Fuzz(func(t *testing.T, format, gl, bl int64, data []byte) {
		x, err := mysqlad.ParseRecoverRow(format, gl, bl, data)
		if err != nil {
			return
		}
		require.Equal(t, data, append(append([]byte{}, x.Gtrid...), x.Bqual...))
		require.EqualValues(t, gl, len(x.Gtrid))
		if format == 1 && bl == 0 {
			require.Equal(t, string(data), x.GID())
		} else {
			require.Equal(t, x.SQL(), x.GID())
		}
	})
}
