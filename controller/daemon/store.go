package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"loam.dev/router/adapters/boltstore"
	"loam.dev/router/adapters/httpstore"
	"loam.dev/router/adapters/tikv"
	"loam.dev/router/controller"
)

// Store is what a daemon and the commands work on: a controller's store, closed when they
// end.
type Store interface {
	controller.Store
	Close() error
}

// OwnLockWait is how long a daemon waits for the embedded store's file lock (a command
// may hold it for a moment).
const OwnLockWait = 10 * time.Second

// OpenStore opens the store [store] of cfg names: TiKV, etcd, a store server (kind remote,
// with store.token_env or store.token_file) or the embedded bbolt file in store.dir, whose
// lock it waits for up to lockWait (bbolt locks the file to one process).
func OpenStore(cfg *controller.Config, lockWait time.Duration) (Store, error) {
	s := cfg.Store
	switch s.Kind {
	case "tikv":
		st, err := tikv.Open(s.PD, nil)
		if err != nil {
			return nil, fmt.Errorf("store.pd %v: %w", s.PD, err)
		}
		return st, nil
	case "etcd":
		st, err := controller.OpenEtcd(&s.Etcd)
		if err != nil {
			return nil, err
		}
		return st, nil
	case "remote":
		opts, err := ClientOptions(cfg, "store.token", s.TokenEnv, s.TokenFile)
		if err != nil {
			return nil, err
		}
		st, err := httpstore.Dial(s.URL, opts)
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("store.dir %s: %w", s.Dir, err)
	}
	b, err := boltstore.Open(filepath.Join(s.Dir, "loam.db"), &boltstore.Options{LockTimeout: lockWait})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// ClientOptions are the options of a client of a store server or a daemon's listen
// address: the token of key (read from the environment variable env or the file file) and
// TLS with cfg's [tls] ca_file and client certificate.
func ClientOptions(cfg *controller.Config, key, env, file string) (*httpstore.Options, error) {
	tok, k, err := controller.ReadToken(key, env, file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k, err)
	}
	t := cfg.TLS
	conf, err := httpstore.ClientTLS(t.CAFile, t.ClientCertFile, t.ClientKeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls.ca_file / tls.client_cert_file: %w", err)
	}
	return &httpstore.Options{Token: tok, TLSConfig: conf}, nil
}
