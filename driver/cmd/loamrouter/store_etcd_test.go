package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/httpstore"
	"loam.dev/router/conformance/etcdtest"
)

// TestEtcdStoreConfig: [store.etcd] is checked with errors that name the key and the fix,
// and no secret goes in the file: credentials come from the environment.
func TestEtcdStoreConfig(t *testing.T) {
	for _, c := range []struct{ name, text, want string }{
		{"no endpoints", "[store]\nkind = \"etcd\"\n", "store.etcd.endpoints: kind etcd needs the members' client URLs"},
		{"plain http off loopback", "[store]\nkind = \"etcd\"\n[store.etcd]\nendpoints = [\"http://10.0.0.1:2379\"]\n", "is plain http to a host that is not loopback; use https://"},
		{"https without ca", "[store]\nkind = \"etcd\"\n[store.etcd]\nendpoints = [\"https://10.0.0.1:2379\"]\n", "store.etcd.ca_file: https endpoints need ca_file"},
		{"not a url", "[store]\nkind = \"etcd\"\n[store.etcd]\nendpoints = [\"10.0.0.1:2379\"]\n", "is not an http(s)://host:port URL"},
		{"cert without key", "[store]\nkind = \"etcd\"\n[store.etcd]\nendpoints = [\"http://127.0.0.1:2379\"]\ncert_file = \"c.pem\"\n", "cert_file and key_file go together"},
		{"user without password", "[store]\nkind = \"etcd\"\n[store.etcd]\nendpoints = [\"http://127.0.0.1:2379\"]\nusername_env = \"U\"\n", "username_env and password_env go together"},
		{"prefix", "[store]\nkind = \"etcd\"\n[store.etcd]\nendpoints = [\"http://127.0.0.1:2379\"]\nprefix = \"loam\"\n", `store.etcd.prefix: "loam" must end in '/'`},
		{"unknown key", "[store]\nkind = \"etcd\"\n[store.etcd]\nendpoint = [\"http://127.0.0.1:2379\"]\n", `store.etcd.endpoint: unknown key (did you mean "endpoints"?)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig("loam.toml", []byte(c.text))
			require.ErrorContains(t, err, c.want)
		})
	}
	cfg, err := ParseConfig("loam.toml", []byte("[store]\nkind = \"etcd\"\n[store.etcd]\nendpoints = [\"https://10.0.0.1:2379\"]\nca_file = \"ca.pem\"\nusername_env = \"LOAM_T_ETCD_USER\"\npassword_env = \"LOAM_T_ETCD_PW\"\ntimeout = \"2s\"\n"))
	require.NoError(t, err)
	_, err = cfg.Store.Etcd.options()
	require.ErrorContains(t, err, "$LOAM_T_ETCD_USER and $LOAM_T_ETCD_PW must both be set")
	t.Setenv("LOAM_T_ETCD_USER", "loam")
	t.Setenv("LOAM_T_ETCD_PW", "pw")
	_, err = cfg.Store.Etcd.options()
	require.ErrorContains(t, err, "store.etcd.ca_file: open ca.pem")

	_, err = etcdURL("10.0.0.1:2379")
	require.ErrorContains(t, err, "not a loopback host:port")
	e, err := etcdURL("127.0.0.1:2379,[::1]:2380")
	require.NoError(t, err)
	require.Equal(t, []string{"http://127.0.0.1:2379", "http://[::1]:2380"}, e.Endpoints)
}

// TestEtcdStoreCLI: the CLI reads and writes the map on a real etcd through --store etcd://
// and through loam.toml's [store.etcd], and both see the same record.
func TestEtcdStoreCLI(t *testing.T) {
	c := etcdtest.Start(t, 1)
	dir := t.TempDir()
	url := etcdStoreURL(c)
	runBin(t, dir, "--store", url, "map", "init", "app", "--example")
	conf := filepath.Join(dir, "loam.toml")
	require.NoError(t, os.WriteFile(conf, []byte("[store]\nkind = \"etcd\"\n[store.etcd]\nendpoints = [\""+c.Endpoints()[0]+"\"]\n"), 0o600))
	out := runBin(t, dir, "--config", conf, "map", "show", "app")
	require.Contains(t, out, `"generation": 1`)
	require.Contains(t, runBin(t, dir, "--store", url, "map", "show", "app"), `"generation": 1`)
}

// etcdStoreTOML is the [store] body for etcd members at host:port,host:port...
func etcdStoreTOML(hostports string) string {
	var eps []string
	for _, hp := range strings.Split(hostports, ",") {
		eps = append(eps, fmt.Sprintf("%q", "http://"+hp))
	}
	return "kind = \"etcd\"\n[store.etcd]\nendpoints = [" + strings.Join(eps, ", ") + "]\ntimeout = \"2s\""
}

// testStore is what the process tests read the shared store through.
type testStore interface {
	adapters.ShardMapStore
	adapters.BlobStore
	Close() error
}

// openURL opens the store a test's daemons share: etcd://... or a store server's URL.
func openURL(t *testing.T, url string) testStore {
	t.Helper()
	if eps, ok := strings.CutPrefix(url, "etcd://"); ok {
		e, err := etcdURL(eps)
		require.NoError(t, err)
		s, err := openEtcd(e)
		require.NoError(t, err)
		return s
	}
	s, err := httpstore.Dial(url, &httpstore.Options{Token: testOpsToken})
	require.NoError(t, err)
	return s
}

// etcdStoreURL is the etcd:// URL of a test cluster.
func etcdStoreURL(c *etcdtest.Cluster) string {
	var hps []string
	for _, ep := range c.Endpoints() {
		hps = append(hps, strings.TrimPrefix(ep, "http://"))
	}
	return "etcd://" + strings.Join(hps, ",")
}
