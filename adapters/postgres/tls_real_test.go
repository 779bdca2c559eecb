package postgres_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters/postgres"
	"loam.dev/router/conformance/pgtest"
)

// testCA makes a CA and a server certificate for 127.0.0.1 signed by it.
func testCA(t *testing.T) (caPool *x509.CertPool, certPEM, keyPEM []byte) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "loam test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	caPool = x509.NewCertPool()
	caPool.AddCert(ca)
	return caPool, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// writeServerKeyPair writes the files where the server can read them: Postgres wants its key
// owned by itself with mode 0600, or by root with 0640 and readable through its group.
func writeServerKeyPair(t *testing.T, certPEM, keyPEM []byte) (certFile, keyFile string) {
	dir, err := os.MkdirTemp("", "loam-tls-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	certFile, keyFile = filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	require.NoError(t, os.WriteFile(certFile, certPEM, 0o644))
	mode := os.FileMode(0o600)
	if os.Geteuid() == 0 {
		mode = 0o640
	}
	require.NoError(t, os.WriteFile(keyFile, keyPEM, mode))
	if os.Geteuid() == 0 {
		g, err := user.LookupGroup("postgres")
		require.NoError(t, err, "running as root, the server runs as postgres and reads its key through that group")
		gid, _ := strconv.Atoi(g.Gid)
		require.NoError(t, os.Chown(keyFile, 0, gid))
	}
	return certFile, keyFile
}

// TestRealTLS: Options.TLS is used whatever the connection string says, the certificate is
// verified, and there is no plaintext fallback.
func TestRealTLS(t *testing.T) {
	pool, certPEM, keyPEM := testCA(t)
	certFile, keyFile := writeServerKeyPair(t, certPEM, keyPEM)
	tlsServer := pgtest.Start(t, pgtest.WithSetting("ssl", "on"), pgtest.WithSetting("ssl_cert_file", certFile), pgtest.WithSetting("ssl_key_file", keyFile))
	ctx := t.Context()

	dsn, err := url.Parse(tlsServer.DSN("postgres")) // says sslmode=disable
	require.NoError(t, err)
	q := dsn.Query()
	q.Set("application_name", "loam-tls-check")
	dsn.RawQuery = q.Encode()

	b, err := postgres.Open(ctx, dsn.String(), postgres.Options{TLS: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}})
	require.NoError(t, err)
	defer b.Close()
	_, err = b.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, "true", tlsServer.QueryString(t, "postgres",
		"SELECT bool_and(s.ssl)::text FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.application_name = 'loam-tls-check'"),
		"the backend's sessions use TLS although the connection string disabled it")

	_, err = postgres.Open(ctx, dsn.String(), postgres.Options{TLS: &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "127.0.0.1"}})
	require.ErrorContains(t, err, "certificate", "a server certificate from an unknown CA is refused")

	plain := pg.Get(t)
	_, err = postgres.Open(ctx, plain.DSN("postgres"), postgres.Options{TLS: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}})
	require.Error(t, err, "a server without TLS is refused, not used in plaintext")
}
