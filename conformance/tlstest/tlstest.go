// Package tlstest makes certificates for tests at test time: a certificate authority, a
// server certificate for 127.0.0.1 and localhost, and client certificates for mutual TLS,
// written as PEM files in a directory removed when the test ends. No key is ever committed.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a test certificate authority and the files it wrote.
type CA struct {
	t    testing.TB
	Dir  string
	File string // the authority's certificate (PEM): a client's ca_file, a server's client_ca_file
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

var serial atomic.Int64

// NewCA makes an authority valid for a day, in a fresh directory.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := genKey(t)
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	check(t, err)
	cert, err := x509.ParseCertificate(der)
	check(t, err)
	dir := t.TempDir()
	ca := &CA{t: t, Dir: dir, File: filepath.Join(dir, "ca.crt"), cert: cert, key: key}
	check(t, os.WriteFile(ca.File, pemOf("CERTIFICATE", der), 0o644))
	return ca
}

// Pool is a certificate pool that trusts the authority.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return pool
}

// Server issues a server certificate for 127.0.0.1, ::1 and localhost named name, and
// returns its certificate and key files.
func (ca *CA) Server(name string) (certFile, keyFile string) {
	return ca.issue(name, &x509.Certificate{
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// Client issues a client certificate whose subject common name is cn.
func (ca *CA) Client(cn string) (certFile, keyFile string) {
	return ca.issue(cn, &x509.Certificate{ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
}

func (ca *CA) issue(name string, tmpl *x509.Certificate) (string, string) {
	t := ca.t
	t.Helper()
	key := genKey(t)
	now := time.Now()
	tmpl.SerialNumber = big.NewInt(serial.Add(1))
	tmpl.Subject = pkix.Name{CommonName: name}
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	check(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	check(t, err)
	n := serial.Load()
	certFile := filepath.Join(ca.Dir, name+"-"+big.NewInt(n).String()+".crt")
	keyFile := filepath.Join(ca.Dir, name+"-"+big.NewInt(n).String()+".key")
	check(t, os.WriteFile(certFile, pemOf("CERTIFICATE", der), 0o644))
	check(t, os.WriteFile(keyFile, pemOf("EC PRIVATE KEY", keyDER), 0o600))
	return certFile, keyFile
}

func genKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	check(t, err)
	return key
}

func pemOf(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("tlstest: %v", err)
	}
}
