package mysql_test

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"github.com/stretchr/testify/require"

	mysqlad "loam.dev/router/adapters/mysql"
	"loam.dev/router/conformance/mysqltest"
)

// TestRealTLS: Options.TLS is used whatever the DSN says, the certificate is verified, and
// there is no plaintext fallback.
func TestRealTLS(t *testing.T) {
	withTLS, pool := mysqltest.WithTLS(t)
	s := mysqltest.Start(t, withTLS)
	ctx := t.Context()
	// An administrator that can only log in over TLS: a Backend that opens proves it used it.
	s.Exec(t, "", "CREATE USER tls_admin@'%' IDENTIFIED BY 'pw' REQUIRE SSL; GRANT ALL ON *.* TO tls_admin@'%'")
	dsn := s.DSN("tls_admin", "pw", "") + "&tls=false"
	_, err := mysqlad.Open(ctx, dsn, mysqlad.Options{})
	require.ErrorIs(t, err, mysqlad.ErrUnverifiedPassword, "a password is not sent over plaintext")
	_, err = mysqlad.Open(ctx, dsn, mysqlad.Options{Insecure: true})
	require.Error(t, err, "the account refuses plaintext")

	b, err := mysqlad.Open(ctx, dsn, mysqlad.Options{TLS: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}})
	require.NoError(t, err)
	defer b.Close()
	_, err = b.Status(ctx)
	require.NoError(t, err)

	_, err = mysqlad.Open(ctx, dsn, mysqlad.Options{TLS: &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "127.0.0.1"}})
	require.ErrorContains(t, err, "certificate", "a server certificate from an unknown CA is refused")

	plain := my.Get(t)
	_, err = mysqlad.Open(ctx, plain.RootDSN(""), mysqlad.Options{TLS: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}})
	require.Error(t, err, "a server without TLS is refused, not used in plaintext")
}
