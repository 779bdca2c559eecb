package vtctld_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	topodatapb "vitess.io/vitess/go/vt/proto/topodata"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/vtctld"
)

// selfSigned makes a CA-less certificate for 127.0.0.1, and the pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "vtctld stand-in"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// TestTLSStandIn: with Config.TLS trusting the server's certificate the call goes through;
// a plaintext client, or one that does not trust the certificate, cannot reach a TLS
// server and gets ErrUnreachable.
func TestTLSStandIn(t *testing.T) {
	cert, pool := selfSigned(t)
	s := newStandIn()
	s.addTablet("zone1-0000000101", "customer", "-80", topodatapb.TabletType_REPLICA)
	addr, stop, err := serve(s, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})))
	require.NoError(t, err)
	defer stop()
	ctx := context.Background()

	c, err := vtctld.Dial(vtctld.Config{Addr: addr, TLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.TabletExternallyReparented(ctx, "customer", "-80", "zone1-0000000101")
	require.NoError(t, err)

	_, otherPool := selfSigned(t)
	for name, cfg := range map[string]*tls.Config{"plaintext": nil, "untrusted certificate": {RootCAs: otherPool}} {
		c, err := vtctld.Dial(vtctld.Config{Addr: addr, TLS: cfg, Timeout: 5 * time.Second})
		require.NoError(t, err)
		_, err = c.TabletExternallyReparented(ctx, "customer", "-80", "zone1-0000000101")
		require.ErrorIs(t, err, adapters.ErrUnreachable, name)
		require.Equal(t, "Unavailable", vitessErr(t, err).Code, name)
		c.Close()
	}
	require.Equal(t, []string{"GetTablets", "TabletExternallyReparented"}, s.called(), "only the TLS client reached the server")
}
