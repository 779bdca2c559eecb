package controller

import (
	"testing"

	"github.com/stretchr/testify/require"
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

	_, err = EtcdURL("10.0.0.1:2379")
	require.ErrorContains(t, err, "not a loopback host:port")
	e, err := EtcdURL("127.0.0.1:2379,[::1]:2380")
	require.NoError(t, err)
	require.Equal(t, []string{"http://127.0.0.1:2379", "http://[::1]:2380"}, e.Endpoints)
}
