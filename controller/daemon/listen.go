package daemon

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"loam.dev/router/adapters/httpstore"
	"loam.dev/router/controller"
	"loam.dev/router/driver"
)

// Listener is one of this process's servers of the store API (controller.listen,
// store-serve's --listen): the address, who it accepts, and its TLS. Listen opens one.
type Listener struct {
	addr  string
	opts  *httpstore.Options
	tls   *tls.Config
	certs *httpstore.CertFiles
	l     net.Listener
}

// maxConns caps the connections one listener holds open: standbys and CLIs need a few
// each (watches are long polls), so 256 is far above a fleet's need and far below a file
// descriptor limit.
const maxConns = 256

// Listen opens a server of the store API at addr for cfg's [[credentials]] and [tls]
// (key names the setting in messages; hosts are the extra names clients reach it by). It
// refuses to start without a credential, and off a loopback address without TLS: secure by
// default, whichever binary serves. "unix:<path>" serves a socket of mode 0600 instead.
func Listen(cfg *controller.Config, key, addr string, hosts []string) (*Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		return listenUnix(cfg, key, path)
	}
	if len(cfg.Credentials) == 0 {
		return nil, fmt.Errorf("%s %s serves the store API, but loam.toml has no [[credentials]]: add one, e.g.\n"+
			"  [[credentials]]\n  name = \"ops\"\n  role = \"operator\"\n  token_file = \"/etc/loam/ops.token\"   # mode 0600\n"+
			"and a controller credential for standbys (role = \"controller\"); or turn the API off (controller.listen = \"off\")", key, addr)
	}
	if !httpstore.IsLoopback(addr) && cfg.TLS.CertFile == "" {
		return nil, fmt.Errorf("%s %s is not a loopback address: serving it needs TLS (tokens would cross the network in the clear); set tls.cert_file and tls.key_file, or listen on 127.0.0.1", key, addr)
	}
	allowed := append(httpstore.LoopbackHosts(addr), hosts...)
	if len(allowed) == 0 {
		return nil, fmt.Errorf("%s %s binds every interface: list the names clients reach it as in controller.hosts (e.g. [\"ctl.example.com:9464\"]), so that a request for another name (DNS rebinding) is refused", key, addr)
	}
	s := &Listener{addr: addr, opts: &httpstore.Options{
		Credentials: cfg.AcceptedCredentials(),
		Authorize:   StorePolicy(cfg.Controller.LeaseMaxTTL.Duration),
		Hosts:       allowed,
		ReadTimeout: cfg.Controller.ReadTimeout.Duration,
	}}
	if cfg.TLS.CertFile != "" {
		certs, err := httpstore.LoadCertFiles(cfg.TLS.CertFile, cfg.TLS.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls.cert_file: %w", err)
		}
		conf, err := httpstore.ServerTLS(certs, cfg.TLS.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("tls.client_ca_file: %w", err)
		}
		s.certs, s.tls = certs, conf
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w (set another address, or \"off\")", key, addr, err)
	}
	// Once listening on port 0, the real port is a Host clients use.
	if real := l.Addr().String(); real != addr {
		s.opts.Hosts = append(s.opts.Hosts, httpstore.LoopbackHosts(real)...)
	}
	s.l = httpstore.LimitListener(l, maxConns)
	if s.tls != nil {
		s.l = tls.NewListener(s.l, s.tls)
	}
	return s, nil
}

// listenUnix serves on a Unix socket of mode 0600 in a directory of its owner's: only the
// user running the daemon can connect, so the caller needs no credential and is that user,
// as a controller (it could read the daemon's own credentials anyway).
func listenUnix(cfg *controller.Config, key, path string) (*Listener, error) {
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("%s unix:%s: %w (create the directory, mode 0700)", key, path, err)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("%s unix:%s: the directory %s is writable by others (mode %v): another user could replace the socket; chmod 700 it", key, path, dir, fi.Mode().Perm())
	}
	if st, err := os.Lstat(path); err == nil && st.Mode()&os.ModeSocket != 0 {
		_ = os.Remove(path) // a socket left by a daemon that died
	}
	old := syscall.Umask(0o177)
	l, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("%s unix:%s: %w", key, path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("%s unix:%s: %w", key, path, err)
	}
	who := fmt.Sprintf("unix:uid-%d", os.Getuid())
	return &Listener{addr: "unix:" + path, l: httpstore.LimitListener(l, maxConns), opts: &httpstore.Options{
		Local:       &httpstore.Identity{Name: who, Role: httpstore.RoleController},
		Authorize:   StorePolicy(cfg.Controller.LeaseMaxTTL.Duration),
		ReadTimeout: cfg.Controller.ReadTimeout.Duration,
	}}, nil
}

// URL is the listener's address as a client dials it (http, https, or unix:<path>).
func (s *Listener) URL() string {
	if strings.HasPrefix(s.addr, "unix:") {
		return s.addr
	}
	if s.tls != nil {
		return "https://" + s.l.Addr().String()
	}
	return "http://" + s.l.Addr().String()
}

// Options are what the listener accepts (its credentials, policy, hosts): wrap handlers
// with httpstore.Authenticate(l.Options(), h), serve the store with httpstore.Handler.
func (s *Listener) Options() *httpstore.Options { return s.opts }

// Close closes a listener that is not served yet (a later step of the start failed).
func (s *Listener) Close() error { return s.l.Close() }

// Serve serves h until the server is closed; SIGHUP reloads the certificate.
func (s *Listener) Serve(h http.Handler, log *slog.Logger) *http.Server {
	srv := httpstore.NewServer(h, s.opts)
	go func() { _ = srv.Serve(s.l) }()
	if s.certs != nil {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		srv.RegisterOnShutdown(func() { signal.Stop(hup); close(hup) })
		go func() {
			for range hup {
				if err := s.certs.Reload(); err != nil {
					log.Error("SIGHUP: the certificate was not reloaded; serving the old one", "err", err)
				} else {
					log.Info("SIGHUP: certificate reloaded", "cert", "tls.cert_file")
				}
			}
		}()
	}
	return srv
}

// StorePolicy is who may touch what in the store: every credential reads; both roles
// change records and requests (request/); only a controller writes machine snapshots
// (machine/), the lease (lease/) and histories (history/); the audit log (audit/) is
// append-only for everyone (retention runs in the store's own process) and each entry is
// stamped with the identity that wrote it (a controller's relayed entry keeps the stamp of
// the API that took it); a lease's TTL may not exceed maxTTL.
func StorePolicy(maxTTL time.Duration) func(httpstore.Identity, *httpstore.Access) error {
	return func(id httpstore.Identity, a *httpstore.Access) error {
		if !a.Write() || a.Op == "cas" {
			return nil // reads; a record's CAS is an operator's map apply or a controller's step
		}
		switch {
		case strings.HasPrefix(a.Key, driver.AuditPrefix):
			if a.Op == "delete" || a.Expect != 0 {
				return errors.New("the audit log is append-only: an entry is created once (expect 0), never rewritten or deleted (old entries are removed by the store's own retention)")
			}
			// A controller relays entries its own API stamped (a daemon on a remote store);
			// controllers are trusted with every shard's password already.
			data, err := driver.StampAuditWho(a.Data, id.Name, id.Role == httpstore.RoleController)
			if err != nil {
				return err
			}
			a.Data = data
			return nil
		case strings.HasPrefix(a.Key, "request/"):
			return nil
		}
		if id.Role != httpstore.RoleController {
			return fmt.Errorf("%s is written by controllers only (key %q): use a credential with role = \"controller\"", space(a.Key), a.Key)
		}
		if strings.HasPrefix(a.Key, "lease/") && a.Op == "put" {
			return driver.CheckLeaseBlob(a.Data, maxTTL)
		}
		return nil
	}
}

func space(key string) string {
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[:i+1]
	}
	return key
}
