package controller

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/shardmap"
)

// TestVitessConfigRefusesPlaintextOffLoopback: a vtctld off loopback needs ca_file (or the
// database's insecure = true); a client certificate needs its key and TLS; loopback in
// plaintext is fine; every refusal names the key.
func TestVitessConfigRefusesPlaintextOffLoopback(t *testing.T) {
	db := "[[databases]]\nname = \"app\"\n"
	for _, c := range []struct{ name, text, want string }{
		{"no address", db + "[databases.vitess]\ntimeout = \"5s\"\n", `databases[0].vitess.vtctld: give vtctld's gRPC address`},
		{"not host:port", db + "[databases.vitess]\nvtctld = \"vtctld\"\n", `databases[0].vitess.vtctld: "vtctld" is not host:port`},
		{"plaintext off loopback", db + "[databases.vitess]\nvtctld = \"10.0.0.9:15999\"\n", "databases[0].vitess.ca_file: vtctld 10.0.0.9:15999 is off loopback and would be reached in plaintext"},
		{"cert without key", db + "[databases.vitess]\nvtctld = \"10.0.0.9:15999\"\nca_file = \"ca.pem\"\ncert_file = \"c.pem\"\n", "databases[0].vitess.cert_file: give both cert_file and key_file"},
		{"cert without TLS", db + "insecure = true\n[databases.vitess]\nvtctld = \"10.0.0.9:15999\"\ncert_file = \"c.pem\"\nkey_file = \"k.pem\"\n", "databases[0].vitess.ca_file: a client certificate needs TLS"},
		{"vtgate not host:port", db + "[databases.vitess]\nvtctld = \"127.0.0.1:15999\"\nvtgate = \"vtgate\"\n", `databases[0].vitess.vtgate: "vtgate" is not host:port`},
		{"vtgate off loopback", db + "[databases.vitess]\nvtctld = \"127.0.0.1:15999\"\nvtgate = \"10.0.0.9:15306\"\nvtgate_user = \"loam\"\n", "databases[0].vitess.vtgate: vtgate 10.0.0.9:15306 is off loopback and its session would be plaintext"},
		{"vtgate without user", db + "[databases.vitess]\nvtctld = \"127.0.0.1:15999\"\nvtgate = \"127.0.0.1:15306\"\n", "databases[0].vitess.vtgate_user: give the vtgate user"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig("loam.toml", []byte(c.text))
			require.True(t, errors.Is(err, ErrConfig), "%v", err)
			require.Contains(t, err.Error(), c.want)
		})
	}
	for _, ok := range []string{
		db + "[databases.vitess]\nvtctld = \"127.0.0.1:15999\"\n",
		db + "[databases.vitess]\nvtctld = \"localhost:15999\"\n",
		db + "insecure = true\n[databases.vitess]\nvtctld = \"10.0.0.9:15999\"\n",
		db + "[databases.vitess]\nvtctld = \"10.0.0.9:15999\"\nca_file = \"ca.pem\"\n",
		db + "[databases.vitess]\nvtctld = \"127.0.0.1:15999\"\nvtgate = \"127.0.0.1:15306\"\nvtgate_user = \"loam\"\n",
		db + "insecure = true\n[databases.vitess]\nvtctld = \"10.0.0.9:15999\"\nvtgate = \"10.0.0.9:15306\"\nvtgate_user = \"loam\"\n",
	} {
		_, err := ParseConfig("loam.toml", []byte(ok))
		require.NoError(t, err, ok)
	}
}

// TestMySQLDSNFollowsSSLMode: the MySQL login of a Vitess shard carries shard_user, the
// password from its environment variable, the record's address and database, and the TLS
// that shard_sslmode asks for.
func TestMySQLDSNFollowsSSLMode(t *testing.T) {
	t.Setenv("LOAM_TEST_SHARD_PW", "s3cret")
	b := shardmap.Backend{Host: "10.0.0.5", Port: 3306, Database: "vt_customer"}
	for mode, tls := range map[string]string{"": "preferred", "prefer": "preferred", "disable": "false", "require": "skip-verify", "verify-full": "true"} {
		dsn := mysqlDSN(&DatabaseConfig{ShardUser: "loam_admin", ShardPasswordEnv: "LOAM_TEST_SHARD_PW", ShardSSLMode: mode}, b)
		require.True(t, strings.HasPrefix(dsn, "loam_admin:s3cret@tcp(10.0.0.5:3306)/vt_customer?"), dsn)
		require.Contains(t, dsn, "tls="+tls, mode)
	}
}
