package vtctld_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/vtctld"
)

// TestRealTablet: a real tablet's record names its shard and the MySQL server behind it
// (the port the tablet's MariaDB listens on, the database vt_<keyspace>), which is what a
// reshard's record names as a target shard's primary; an alias vtctld does not know is
// ErrNotFound.
func TestRealTablet(t *testing.T) {
	_, tablets := customer(t)
	cl := dial(t, vtctld.Config{Addr: vt.Get(t).VtctldAddr})
	ctx := context.Background()
	for _, tb := range tablets {
		got, err := cl.Tablet(ctx, tb.Alias)
		require.NoError(t, err)
		require.Equal(t, adapters.TabletInfo{Alias: tb.Alias, Keyspace: "customer", Shard: tb.Shard, MySQLHost: "127.0.0.1", MySQLPort: tb.MySQLPort, DBName: tb.DBName()}, got)
	}
	_, err := cl.Tablet(ctx, "zone1-0000099999")
	require.ErrorIs(t, err, adapters.ErrNotFound)
	_, err = cl.Tablet(ctx, "not-an-alias")
	require.Error(t, err)
}
