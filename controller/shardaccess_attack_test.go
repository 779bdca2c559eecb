package controller

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/shardmap"
)

// recorder is a TCP listener keeping every byte it is sent, so a test can tell whether a
// password ever reached it.
type recorder struct {
	ln    net.Listener
	mu    sync.Mutex
	conns int
	got   bytes.Buffer
}

func newRecorder(t *testing.T) *recorder {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	r := &recorder{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			r.conns++
			r.mu.Unlock()
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					r.mu.Lock()
					r.got.Write(buf[:n])
					r.mu.Unlock()
					if err != nil {
						return
					}
					// Refuse TLS ('N'): a plaintext server, as an attacker's would be.
					if _, err := c.Write([]byte{'N'}); err != nil {
						return
					}
				}
			}()
		}
	}()
	return r
}

// TestAttackHostileShardHostThroughTheDaemon: a record that points a shard at a host of
// the attacker's does not make the controller send its shard password there: a host not in
// shards.allow is never connected to, and an allowed one is reached only with sslmode
// verify-full, which a server without the shards' certificate cannot pass, so no password
// is sent.
func TestAttackHostileShardHostThroughTheDaemon(t *testing.T) {
	const pw = "shard-superuser-pw"
	t.Setenv("SHARD_PW", pw)
	r := newRecorder(t)
	port := r.ln.Addr().(*net.TCPAddr).Port
	base := "[[databases]]\nname = \"app\"\nshard_user = \"loam_admin\"\nshard_password_env = \"SHARD_PW\"\n"
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	hostile := shardmap.Backend{Host: "127.0.0.1", Port: uint16(port), Database: "app"}

	cfg, err := ParseConfig("loam.toml", []byte(base+"[shards]\nallow = [\"10.0.0.0/8\"]\n"))
	require.NoError(t, err)
	_, err = DialShard(ctx, &cfg.Databases[0], hostile)
	require.True(t, errors.Is(err, ErrHostNotAllowed), "%v", err)
	require.ErrorContains(t, err, "shards.allow")
	r.mu.Lock()
	require.Zero(t, r.conns, "a host not allowed is never connected to")
	r.mu.Unlock()

	cfg, err = ParseConfig("loam.toml", []byte(base+"[shards]\nallow = [\"127.0.0.1\"]\n"))
	require.NoError(t, err)
	require.Contains(t, shardDSN(&cfg.Databases[0], hostile), "sslmode=verify-full", "the default")
	_, err = DialShard(ctx, &cfg.Databases[0], hostile)
	require.Error(t, err)
	require.NotContains(t, err.Error(), pw)
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Positive(t, r.conns, "the allowed host was reached")
	require.NotContains(t, r.got.String(), pw, "and never sent the password")
	require.NotContains(t, r.got.String(), "loam_admin", "nor even the login: TLS comes first")
}

// TestShardAccessConfig: a database whose controller logs into shards with a password
// needs [shards] allow and a verifying sslmode unless it is insecure; every entry is a host,
// *.domain, IP or CIDR; errors name the key and the fix.
func TestShardAccessConfig(t *testing.T) {
	t.Setenv("SHARD_PW", "pw")
	const db = "[[databases]]\nname = \"app\"\nshard_user = \"loam_admin\"\nshard_password_env = \"SHARD_PW\"\n"
	for _, c := range []struct{ name, text, want string }{
		{"no allow-list", db, "databases[0].shard_password_env: the controller logs into shards with this password but shards.allow is empty"},
		{"plaintext", db + "shard_sslmode = \"disable\"\n[shards]\nallow = [\"10.0.0.0/8\"]\n", `databases[0].shard_sslmode: "disable" does not verify the shard's certificate`},
		{"unverified TLS", db + "shard_sslmode = \"require\"\n[shards]\nallow = [\"10.0.0.0/8\"]\n", `databases[0].shard_sslmode: "require" does not verify`},
		{"bad CIDR", db + "[shards]\nallow = [\"10.0.0.0/33\"]\n", `shards.allow[0]: "10.0.0.0/33" is not a CIDR`},
		{"bad host", db + "[shards]\nallow = [\"ok.example\", \"db1,evil\"]\n", `shards.allow[1]: "db1,evil" is not a host name, *.domain, IP address or CIDR`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig("loam.toml", []byte(c.text))
			require.ErrorIs(t, err, ErrConfig)
			require.ErrorContains(t, err, c.want)
		})
	}
	cfg, err := ParseConfig("loam.toml", []byte(db+"[shards]\nallow = [\"10.0.0.0/8\", \"*.db.internal\", \"pg-1.example\", \"192.168.1.7\", \"::1\"]\n"))
	require.NoError(t, err)
	a := cfg.Databases[0].shardAllow
	for h, want := range map[string]bool{
		"10.1.2.3": true, "11.0.0.1": false, "pg-0.db.internal": true, "db.internal": false, "evil.db.internal.example": false,
		"PG-1.example": true, "pg-1.example.": true, "pg-2.example": false, "192.168.1.7": true, "192.168.1.8": false, "::1": true, "::2": false,
	} {
		require.Equal(t, want, a.permits(h), h)
	}
	_, err = ParseConfig("loam.toml", []byte(db+"insecure = true\n"))
	require.NoError(t, err, "an insecure (development) database may go without the list")
}
