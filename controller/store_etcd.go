package controller

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"loam.dev/router/adapters/etcdstore"
)

// EtcdStoreConfig is [store.etcd]: the etcd cluster of store.kind = "etcd".
type EtcdStoreConfig struct {
	// Endpoints are the members' client URLs. https:// needs ca_file; http:// is accepted
	// on loopback addresses only.
	Endpoints []string `toml:"endpoints"`
	// Prefix of every key (default "loam/"); deployments sharing an etcd use one each.
	Prefix string `toml:"prefix"`
	// CAFile verifies the members' certificates; CertFile and KeyFile are this client's,
	// for members that require client certificates.
	CAFile   string `toml:"ca_file"`
	CertFile string `toml:"cert_file"`
	KeyFile  string `toml:"key_file"`
	// UsernameEnv and PasswordEnv name the environment variables holding etcd's
	// credentials (when its auth is enabled). The credentials never go in loam.toml.
	UsernameEnv string `toml:"username_env"`
	PasswordEnv string `toml:"password_env"`
	// Timeout bounds each store call (default 5s): a cluster without quorum answers
	// nothing, and the controller must notice.
	Timeout Duration `toml:"timeout"`
}

// isLoopback reports whether host (no port) is a loopback address or localhost.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// check validates [store.etcd]; errors name the key and the fix.
func (e *EtcdStoreConfig) check(bad func(key, format string, a ...any) error) error {
	if len(e.Endpoints) == 0 {
		return bad("store.etcd.endpoints", "kind etcd needs the members' client URLs, e.g. endpoints = [\"https://10.0.0.1:2379\", \"https://10.0.0.2:2379\", \"https://10.0.0.3:2379\"]")
	}
	for _, ep := range e.Endpoints {
		u, err := url.Parse(ep)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return bad("store.etcd.endpoints", "%q is not an http(s)://host:port URL", ep)
		}
		if u.Scheme == "http" && !isLoopback(u.Hostname()) {
			return bad("store.etcd.endpoints", "%q is plain http to a host that is not loopback; use https:// with ca_file (etcd's --cert-file/--key-file)", ep)
		}
		if u.Scheme == "https" && e.CAFile == "" {
			return bad("store.etcd.ca_file", "https endpoints need ca_file, the CA that signed the members' certificates")
		}
	}
	if (e.CertFile == "") != (e.KeyFile == "") {
		return bad("store.etcd.cert_file", "cert_file and key_file go together (this client's certificate and its key)")
	}
	if (e.UsernameEnv == "") != (e.PasswordEnv == "") {
		return bad("store.etcd.username_env", "username_env and password_env go together (the names of the environment variables holding etcd's credentials)")
	}
	if e.Prefix != "" && !strings.HasSuffix(e.Prefix, "/") {
		return bad("store.etcd.prefix", "%q must end in '/' (e.g. \"loam/\")", e.Prefix)
	}
	return nil
}

// options builds the store's options, reading the credentials and certificate files.
func (e *EtcdStoreConfig) options() (etcdstore.Options, error) {
	o := etcdstore.Options{Endpoints: e.Endpoints, Prefix: e.Prefix, Timeout: e.Timeout.Duration}
	if e.UsernameEnv != "" {
		o.Username, o.Password = os.Getenv(e.UsernameEnv), os.Getenv(e.PasswordEnv)
		if o.Username == "" || o.Password == "" {
			return o, fmt.Errorf("store.etcd: $%s and $%s must both be set (etcd's username and password)", e.UsernameEnv, e.PasswordEnv)
		}
	}
	if e.CAFile != "" {
		pem, err := os.ReadFile(e.CAFile)
		if err != nil {
			return o, fmt.Errorf("store.etcd.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return o, fmt.Errorf("store.etcd.ca_file %s: no PEM certificate in it", e.CAFile)
		}
		o.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		if e.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(e.CertFile, e.KeyFile)
			if err != nil {
				return o, fmt.Errorf("store.etcd.cert_file/key_file: %w", err)
			}
			o.TLS.Certificates = []tls.Certificate{cert}
		}
	}
	return o, nil
}

// OpenEtcd opens the store of [store.etcd].
func OpenEtcd(e *EtcdStoreConfig) (*etcdstore.Store, error) {
	o, err := e.options()
	if err != nil {
		return nil, err
	}
	return etcdstore.Open(o)
}

// EtcdURL parses --store etcd://host:port[,host:port...]: plain http on loopback, for
// local clusters and tests; anything else needs [store.etcd] in loam.toml.
func EtcdURL(rest string) (*EtcdStoreConfig, error) {
	e := &EtcdStoreConfig{}
	for _, hp := range strings.Split(rest, ",") {
		host, _, err := net.SplitHostPort(hp)
		if err != nil || !isLoopback(host) {
			return nil, fmt.Errorf("--store etcd://%s: %q is not a loopback host:port; for a remote cluster set store.kind = \"etcd\" with TLS in loam.toml", rest, hp)
		}
		e.Endpoints = append(e.Endpoints, "http://"+hp)
	}
	return e, nil
}
