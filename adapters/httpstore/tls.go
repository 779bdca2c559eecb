package httpstore

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// newTransport is the client's default transport: every phase of a call is bounded, so a
// peer that accepts and never answers fails the call instead of holding it.
func newTransport(conf *tls.Config, header time.Duration) *http.Transport {
	return &http.Transport{
		Proxy:                 nil, // the store is reached directly, never through an environment proxy
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       conf,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: header,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   8,
		ForceAttemptHTTP2:     true,
	}
}

// ClientTLS is the TLS configuration of a client of an https:// server: caFile (PEM) is
// the certificate authority the server's certificate must chain to (empty: the system's
// roots); certFile and keyFile, when set, are the client certificate for mutual TLS.
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := loadPool(caFile)
		if err != nil {
			return nil, err
		}
		conf.RootCAs = pool
	}
	if certFile != "" || keyFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("httpstore: client certificate %s / key %s: %w", certFile, keyFile, err)
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	return conf, nil
}

func loadPool(caFile string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("httpstore: CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("httpstore: CA file %s holds no PEM certificate", caFile)
	}
	return pool, nil
}

// CertFiles is a server's certificate, read from its files at start and again on every
// Reload (loamrouter reloads on SIGHUP), so a renewed certificate is served without a
// restart; connections already open keep the one they started with.
type CertFiles struct {
	certFile, keyFile string
	mu                sync.RWMutex
	cert              *tls.Certificate
}

// LoadCertFiles reads a certificate and its key (PEM).
func LoadCertFiles(certFile, keyFile string) (*CertFiles, error) {
	c := &CertFiles{certFile: certFile, keyFile: keyFile}
	return c, c.Reload()
}

// Reload reads the files again; on an error the certificate served stays the old one.
func (c *CertFiles) Reload() error {
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("httpstore: certificate %s / key %s: %w", c.certFile, c.keyFile, err)
	}
	c.mu.Lock()
	c.cert = &cert
	c.mu.Unlock()
	return nil
}

// GetCertificate implements tls.Config.GetCertificate.
func (c *CertFiles) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.cert, nil
}

// ServerTLS is a server's TLS configuration serving certs; with clientCAFile set, every
// client must present a certificate that chains to it (mutual TLS), and its subject's
// common name can be a Credential's CertCN.
func ServerTLS(certs *CertFiles, clientCAFile string) (*tls.Config, error) {
	conf := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.GetCertificate}
	if clientCAFile != "" {
		pool, err := loadPool(clientCAFile)
		if err != nil {
			return nil, err
		}
		conf.ClientCAs = pool
		conf.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return conf, nil
}

// NewServer is an http.Server for h with every phase bounded: headers within 5s, a whole
// request within opts.ReadTimeout (default 10s: a slow body is cut off), an answer within
// the watch wait and 10s, idle connections closed after 60s, headers at most 16 KiB.
func NewServer(h http.Handler, opts *Options) *http.Server {
	wait, read := defaultWatchWait, defaultReadTimeout
	if opts != nil && opts.WatchWait > 0 {
		wait = opts.WatchWait
	}
	if opts != nil && opts.ReadTimeout > 0 {
		read = opts.ReadTimeout
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: min(5*time.Second, read),
		ReadTimeout:       read,
		WriteTimeout:      wait + 10*time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
}

// LimitListener accepts at most n connections at once; more wait in the kernel's backlog
// until one closes.
func LimitListener(l net.Listener, n int) net.Listener {
	return &limitListener{Listener: l, sem: make(chan struct{}, n)}
}

type limitListener struct {
	net.Listener
	sem chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.sem <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
