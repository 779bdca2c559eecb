package postgres_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters/postgres"
)

// hostile is a listener speaking just enough of the Postgres protocol to collect a
// password: it refuses TLS ('N' to an SSLRequest) and asks for the password in cleartext
// (AuthenticationCleartextPassword), as a shard record pointed at an attacker's host would.
type hostile struct {
	ln net.Listener
	mu sync.Mutex
	// got are the passwords it was sent; conns the connections it accepted.
	got   []string
	conns int
}

func newHostile(t *testing.T) *hostile {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	h := &hostile{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.conns++
			h.mu.Unlock()
			go h.serve(c)
		}
	}()
	return h
}

func (h *hostile) port() int { return h.ln.Addr().(*net.TCPAddr).Port }

func (h *hostile) passwords() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.got...)
}

func (h *hostile) serve(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	for {
		var hdr [8]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		n, code := binary.BigEndian.Uint32(hdr[:4]), binary.BigEndian.Uint32(hdr[4:])
		if n < 8 || n > 10000 {
			return
		}
		if _, err := io.CopyN(io.Discard, r, int64(n-8)); err != nil {
			return
		}
		if code == 80877103 || code == 80877104 { // SSLRequest, GSSENCRequest: refused
			if _, err := c.Write([]byte{'N'}); err != nil {
				return
			}
			continue
		}
		break // the StartupMessage
	}
	// AuthenticationCleartextPassword.
	if _, err := c.Write([]byte{'R', 0, 0, 0, 8, 0, 0, 0, 3}); err != nil {
		return
	}
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil || hdr[0] != 'p' {
		return
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n < 5 || n > 10000 {
		return
	}
	body := make([]byte, n-4)
	if _, err := io.ReadFull(r, body); err != nil {
		return
	}
	h.mu.Lock()
	h.got = append(h.got, string(body[:len(body)-1]))
	h.mu.Unlock()
}

// TestAttackHostileShardHost: a shard record pointing at a host that asks for the
// password in cleartext never gets it: without sslmode (verify-full by default), with
// sslmode disable, prefer (its plaintext fallback is dropped) or require (TLS that
// verifies nothing), Open refuses or fails before any password is sent. Only insecure,
// named as development only, sends it, which shows the listener would have collected it.
func TestAttackHostileShardHost(t *testing.T) {
	const pw = "superuser-s3cret"
	h := newHostile(t)
	base := "postgres://loam_admin:" + pw + "@127.0.0.1:" + strconv.Itoa(h.port()) + "/app"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, dsn := range []string{base, base + "?sslmode=disable", base + "?sslmode=prefer", base + "?sslmode=allow", base + "?sslmode=require",
		"host=127.0.0.1 port=" + strconv.Itoa(h.port()) + " user=loam_admin password=" + pw + " dbname=app sslmode=disable"} {
		_, err := postgres.Open(ctx, dsn, postgres.Options{})
		require.Error(t, err, dsn)
		require.NotContains(t, err.Error(), pw, "the error does not carry the password")
		require.Empty(t, h.passwords(), "%s: the password reached the hostile host", dsn)
	}
	for _, dsn := range []string{base + "?sslmode=disable", base + "?sslmode=require"} {
		_, err := postgres.Open(ctx, dsn, postgres.Options{})
		require.True(t, errors.Is(err, postgres.ErrUnverifiedPassword), "%s: %v", dsn, err)
		require.ErrorContains(t, err, "insecure", "the error says how to allow it in development")
	}

	_, err := postgres.Open(ctx, base+"?sslmode=disable", postgres.Options{Insecure: true})
	require.Error(t, err, "the hostile host never completes the login")
	require.Equal(t, []string{pw}, h.passwords(), "insecure sends the password: the listener is a real trap")
}
