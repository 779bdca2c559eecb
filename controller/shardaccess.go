package controller

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/postgres"
	"loam.dev/router/kernel/shardmap"
)

// ShardsConfig is [shards]: where the controller may log into shards with its password.
// A shard map record names the hosts, and whoever can write a record could point one at a
// host of theirs; the controller logs in only to hosts listed here, over TLS that verifies
// the server (sslmode verify-full by default), so the password goes to no one else.
type ShardsConfig struct {
	// Allow lists the hosts the controller may log into as shard_user: DNS names,
	// "*.domain" (any name under domain), IP addresses and CIDRs ("10.0.0.0/8").
	// Required when a database has a shard password and is not insecure; an insecure
	// (development) database with an empty list may reach any host.
	Allow []string `toml:"allow"`
}

// shardAllow is the parsed allow-list.
type shardAllow struct {
	names  []string // exact, lower case
	suffix []string // ".domain" of "*.domain"
	nets   []*net.IPNet
	ips    []net.IP
}

func (a *shardAllow) empty() bool {
	return a == nil || len(a.names)+len(a.suffix)+len(a.nets)+len(a.ips) == 0
}

// permits reports whether host (a record's, already a DNS name or an IP literal) is listed.
func (a *shardAllow) permits(host string) bool {
	if a == nil {
		return false
	}
	if ip := net.ParseIP(host); ip != nil {
		for _, n := range a.nets {
			if n.Contains(ip) {
				return true
			}
		}
		for _, x := range a.ips {
			if x.Equal(ip) {
				return true
			}
		}
		return false
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	for _, n := range a.names {
		if h == n {
			return true
		}
	}
	for _, s := range a.suffix {
		if strings.HasSuffix(h, s) && len(h) > len(s) {
			return true
		}
	}
	return false
}

// check validates [shards] and the databases' shard logins against it, and hands each
// database the parsed list.
func (s ShardsConfig) check(dbs []DatabaseConfig, bad func(key, format string, a ...any) error) error {
	allow := &shardAllow{}
	for i, e := range s.Allow {
		at := fmt.Sprintf("shards.allow[%d]", i)
		switch {
		case strings.Contains(e, "/"):
			_, n, err := net.ParseCIDR(e)
			if err != nil {
				return bad(at, "%q is not a CIDR such as \"10.0.0.0/8\": %v", e, err)
			}
			allow.nets = append(allow.nets, n)
		case net.ParseIP(e) != nil:
			allow.ips = append(allow.ips, net.ParseIP(e))
		case strings.HasPrefix(e, "*.") && shardmap.IsHost(e[2:]):
			allow.suffix = append(allow.suffix, "."+strings.ToLower(strings.TrimSuffix(e[2:], ".")))
		case shardmap.IsHost(e):
			allow.names = append(allow.names, strings.ToLower(strings.TrimSuffix(e, ".")))
		default:
			return bad(at, "%q is not a host name, *.domain, IP address or CIDR", e)
		}
	}
	for i := range dbs {
		d := &dbs[i]
		d.shardAllow = allow
		if d.ShardUser == "" || d.ShardPasswordEnv == "" || d.Insecure {
			continue
		}
		at := fmt.Sprintf("databases[%d]", i)
		switch d.ShardSSLMode {
		case "disable", "allow", "prefer", "require":
			return bad(at+".shard_sslmode", "%q does not verify the shard's certificate, so the shard password could go to any host that answers; use verify-full (the default) or verify-ca with the servers' CA, or set insecure = true for a development database", d.ShardSSLMode)
		}
		if allow.empty() {
			return bad(at+".shard_password_env", "the controller logs into shards with this password but shards.allow is empty: list the shard hosts or CIDRs it may log into (e.g. [shards] allow = [\"10.0.0.0/8\", \"*.db.internal\"]), or set insecure = true for a development database")
		}
	}
	return nil
}

// DialShard opens a shard's server as shard_user: only a host the allow-list permits (any
// host for an insecure database with no list), and only over verified TLS unless insecure.
func DialShard(ctx context.Context, dc *DatabaseConfig, b shardmap.Backend) (adapters.ShardBackend, error) {
	if !(dc.Insecure && dc.shardAllow.empty()) && !dc.shardAllow.permits(b.Host) {
		return nil, fmt.Errorf("shard %s:%d: %w: the host is not in shards.allow of loam.toml; add it (or its CIDR) if the controller may log into it", b.Host, b.Port, ErrHostNotAllowed)
	}
	return postgres.Open(ctx, shardDSN(dc, b), postgres.Options{Insecure: dc.Insecure})
}

// ErrHostNotAllowed: a record names a shard host the allow-list does not permit.
var ErrHostNotAllowed = errors.New("refusing to log into a shard host not allowed")
