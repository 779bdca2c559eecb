package mysql_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	mysqlad "loam.dev/router/adapters/mysql"
)

// TestAttackHostileShardHost: a DSN that would send the administrator's password to a
// server it does not verify (tls=false, skip-verify, preferred) is refused before any
// connection is made, so a host of someone else's learns nothing; a DSN naming no tls
// parameter is verified TLS, which the listener (speaking no TLS) cannot pass.
func TestAttackHostileShardHost(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addr := ln.Addr().String()
	for _, tlsParam := range []string{"false", "skip-verify", "preferred"} {
		_, err := mysqlad.Open(ctx, "vt_dba:s3cret@tcp("+addr+")/app?tls="+tlsParam, mysqlad.Options{})
		require.ErrorIs(t, err, mysqlad.ErrUnverifiedPassword, tlsParam)
		require.ErrorContains(t, err, "insecure")
		require.NotContains(t, err.Error(), "s3cret")
	}
	require.Zero(t, accepted.Load(), "no connection was even made")

	_, err = mysqlad.Open(ctx, "vt_dba:s3cret@tcp("+addr+")/app?timeout=2s", mysqlad.Options{})
	require.Error(t, err, "verified TLS by default: a server without it is refused")
	require.NotErrorIs(t, err, mysqlad.ErrUnverifiedPassword)
}
