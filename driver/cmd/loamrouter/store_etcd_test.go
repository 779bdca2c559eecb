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
	"loam.dev/router/controller"
)

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
		e, err := controller.EtcdURL(eps)
		require.NoError(t, err)
		s, err := controller.OpenEtcd(e)
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
