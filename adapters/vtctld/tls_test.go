package vtctld_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/vtctld"
	"loam.dev/router/conformance/vitesstest"
)

// selfSigned makes a self-signed CA certificate for 127.0.0.1, good for a server and a
// client, its PEM files, and the pool that trusts it.
func selfSigned(t *testing.T) (cert tls.Certificate, certPEM, keyPEM []byte, pool *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "vtctld test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool = x509.NewCertPool()
	pool.AddCert(leaf)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, certPEM, keyPEM, pool
}

// TestRealTLS: a real vtctld serving TLS and requiring a client certificate (--grpc-cert,
// --grpc-key, --grpc-ca) answers a client whose Config.TLS trusts its certificate and
// presents one it trusts; a plaintext client, one that does not trust the server, and one
// without a certificate cannot reach it and get ErrUnreachable.
func TestRealTLS(t *testing.T) {
	c, _ := customer(t)
	cert, certPEM, keyPEM, pool := selfSigned(t)
	certFile := c.WriteFile(t, "vtctld.crt", certPEM)
	addr := c.StartVtctld(t, "--grpc-cert", certFile, "--grpc-key", c.WriteFile(t, "vtctld.key", keyPEM), "--grpc-ca", certFile)
	ctx := context.Background()

	cl := dial(t, vtctld.Config{Addr: addr, TLS: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}})
	parts, err := cl.SrvKeyspace(ctx, "customer", vitesstest.Cell)
	require.NoError(t, err)
	require.Len(t, adapters.Serving(parts, adapters.TabletPrimary), 2)

	_, _, _, otherPool := selfSigned(t)
	for name, cfg := range map[string]*tls.Config{
		"plaintext":             nil,
		"untrusted certificate": {RootCAs: otherPool, Certificates: []tls.Certificate{cert}},
		"no client certificate": {RootCAs: pool},
	} {
		cl := dial(t, vtctld.Config{Addr: addr, TLS: cfg, Timeout: 10 * time.Second})
		_, err := cl.SrvKeyspace(ctx, "customer", vitesstest.Cell)
		require.ErrorIs(t, err, adapters.ErrUnreachable, name)
		require.Equal(t, "Unavailable", vitessErr(t, err).Code, name)
	}
}
