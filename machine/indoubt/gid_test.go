package indoubt_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/machine/indoubt"
)

func TestParseGID(t *testing.T) {
	for _, tc := range []struct {
		gid, deployment string
		want            indoubt.GID
	}{
		// NODE_ID unset: 8 random hex digits per process.
		{"__pgdog_2pc_1a2b3c4d_9007199254740993_0", "", indoubt.GID{Instance: "1a2b3c4d", Random: 9007199254740993, Shard: 0, Txn: "__pgdog_2pc_1a2b3c4d_9007199254740993"}},
		// The largest random PgDog draws (uint64 max) and a two-digit shard position.
		{"__pgdog_2pc_pgdog-0_18446744073709551615_12", "", indoubt.GID{Instance: "pgdog-0", Random: 18446744073709551615, Shard: 12, Txn: "__pgdog_2pc_pgdog-0_18446744073709551615"}},
		// D306's StatefulSet: DEPLOYMENT_ID = <cluster>-<db>, NODE_ID = the pod ordinal.
		{"__pgdog_2pc_prod-app_3_42_1", "prod-app", indoubt.GID{Deployment: "prod-app", Instance: "3", Random: 42, Shard: 1, Txn: "__pgdog_2pc_prod-app_3_42"}},
		// Both ids contain '_': only the configured deployment tells where one ends.
		{"__pgdog_2pc_eu_west_app_node_7_5_2", "eu_west_app", indoubt.GID{Deployment: "eu_west_app", Instance: "node_7", Random: 5, Shard: 2, Txn: "__pgdog_2pc_eu_west_app_node_7_5"}},
		// Without the deployment, the whole middle is the instance id.
		{"__pgdog_2pc_eu_west_app_node_7_5_2", "", indoubt.GID{Instance: "eu_west_app_node_7", Random: 5, Shard: 2, Txn: "__pgdog_2pc_eu_west_app_node_7_5"}},
		// The shape postgres.md's example row uses.
		{"__pgdog_2pc_test_1_2", "", indoubt.GID{Instance: "test", Random: 1, Shard: 2, Txn: "__pgdog_2pc_test_1"}},
	} {
		got, err := indoubt.ParseGID(tc.gid, tc.deployment)
		require.NoError(t, err, tc.gid)
		require.Equal(t, tc.want, got, tc.gid)
	}
}

func TestParseGIDRefuses(t *testing.T) {
	for _, tc := range []struct {
		gid, deployment string
		want            error
	}{
		{"", "", indoubt.ErrNotPgDog},
		{"xa_app_17", "", indoubt.ErrNotPgDog},
		{"__PGDOG_2PC_a_1_0", "", indoubt.ErrNotPgDog}, // gids are case-sensitive
		{"__pgdog_2pc_", "", indoubt.ErrMalformed},
		{"__pgdog_2pc_a_1", "", indoubt.ErrMalformed},                      // no shard suffix (SHOW TRANSACTIONS form)
		{"__pgdog_2pc__1_0", "", indoubt.ErrMalformed},                     // empty instance
		{"__pgdog_2pc_a_x_0", "", indoubt.ErrMalformed},                    // random not decimal
		{"__pgdog_2pc_a_1_", "", indoubt.ErrMalformed},                     // empty shard
		{"__pgdog_2pc_a_-1_0", "", indoubt.ErrMalformed},                   // signed
		{"__pgdog_2pc_a_+1_0", "", indoubt.ErrMalformed},                   // signed
		{"__pgdog_2pc_a_18446744073709551616_0", "", indoubt.ErrMalformed}, // overflows uint64
		{"__pgdog_2pc_a_1_0", "prod-app", indoubt.ErrOtherDeployment},
		{"__pgdog_2pc_prod-app_1_0", "prod-app", indoubt.ErrOtherDeployment}, // deployment, no instance
	} {
		_, err := indoubt.ParseGID(tc.gid, tc.deployment)
		require.ErrorIs(t, err, tc.want, "%q", tc.gid)
	}
}

// FuzzParseGID: any string either fails with one of the three errors or parses into parts
// that rebuild the gid exactly.
func FuzzParseGID(f *testing.F) {
	f.Add("__pgdog_2pc_prod-app_3_42_1", "prod-app")
	f.Add("__pgdog_2pc_1a2b3c4d_9007199254740993_0", "")
	f.Add("__pgdog_2pc_a__1_0", "a")
	f.Add("xa_1", "")
	f.Fuzz(func(t *testing.T, gid, deployment string) {
		g, err := indoubt.ParseGID(gid, deployment)
		if err != nil {
			if !errors.Is(err, indoubt.ErrNotPgDog) && !errors.Is(err, indoubt.ErrMalformed) && !errors.Is(err, indoubt.ErrOtherDeployment) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		mid := g.Instance
		if g.Deployment != "" {
			mid = g.Deployment + "_" + g.Instance
		}
		if g.Deployment != deployment || g.Instance == "" || !strings.HasPrefix(gid, g.Txn+"_") {
			t.Fatalf("parts do not match: %+v", g)
		}
		if rebuilt := indoubt.GIDPrefix + mid + "_" + strconv.FormatUint(g.Random, 10) + "_" + strconv.FormatUint(g.Shard, 10); rebuilt != gid && !leadingZeros(gid) {
			t.Fatalf("%q parsed to %+v, which rebuilds %q", gid, g, rebuilt)
		}
	})
}

// leadingZeros: "_007" parses as 7, so such a gid does not rebuild byte for byte.
func leadingZeros(gid string) bool {
	parts := strings.Split(gid, "_")
	n := len(parts)
	return n >= 2 && (len(parts[n-1]) > 1 && parts[n-1][0] == '0' || len(parts[n-2]) > 1 && parts[n-2][0] == '0')
}
