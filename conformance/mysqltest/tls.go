package mysqltest

import (
	"crypto/x509"
	"testing"

	"loam.dev/router/conformance/tlstest"
)

// WithTLS makes a certificate authority and a server certificate for 127.0.0.1 signed by it
// (conformance/tlstest), in a directory removed when the test ends, and returns the option
// that serves TLS with them and the pool that trusts the authority. The server still accepts
// plaintext connections; make an account REQUIRE SSL to refuse them.
func WithTLS(t testing.TB) (Option, *x509.CertPool) {
	t.Helper()
	ca := tlstest.NewCA(t, "loam mysqltest CA")
	certFile, keyFile := ca.Server("127.0.0.1")
	return func(c *config) {
		c.flags = append(c.flags, "--ssl-cert="+certFile, "--ssl-key="+keyFile)
	}, ca.Pool()
}
