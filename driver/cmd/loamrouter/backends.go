package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/pgdog"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/shardmap"
)

// fleet is what one database's machines act on: its router instances, the resharding
// commands of those that can reshard, and the servers of its shards, opened when first
// needed (a reshard brings new shards).
type fleet struct {
	routers    map[string]adapters.RouterInstance
	resharders map[string]adapters.Resharder
	// dial opens a shard's server.
	dial func(ctx context.Context, b shardmap.Backend) (adapters.ShardBackend, error)
	// vitess is vtctld, for a database routed by Vitess (nil otherwise).
	vitess adapters.VitessControl

	mu      sync.Mutex
	known   map[string]shardmap.Backend // by driver.BackendKey, from every record seen
	byName  map[string]string           // shard name → backend key, of the latest record
	open    map[string]adapters.ShardBackend
	closers []func()
}

func newFleet() *fleet {
	return &fleet{routers: map[string]adapters.RouterInstance{}, resharders: map[string]adapters.Resharder{},
		known: map[string]shardmap.Backend{}, byName: map[string]string{}, open: map[string]adapters.ShardBackend{}}
}

// learn records the shards of a record (its layout and, during a reshard, its target).
func (f *fleet) learn(rec *shardmap.Record) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byName = map[string]string{}
	for _, l := range layouts(rec) {
		for _, s := range l.Shards {
			k := driver.BackendKey(s.Backend)
			f.known[k] = s.Backend
			f.byName[s.Name] = k
		}
	}
}

// backend returns the server behind key, opening it on first use.
func (f *fleet) backend(ctx context.Context, key string) (adapters.ShardBackend, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.open[key]; ok {
		return b, nil
	}
	be, ok := f.known[key]
	if !ok {
		return nil, fmt.Errorf("%w %s (in no record this controller has seen)", driver.ErrUnknownBackend, key)
	}
	if f.dial == nil {
		return nil, fmt.Errorf("shard %s: no Postgres access configured (set databases.shard_user)", key)
	}
	b, err := f.dial(ctx, be)
	if err != nil {
		return nil, err
	}
	f.open[key] = b
	if c, ok := b.(interface{ Close() }); ok {
		f.closers = append(f.closers, c.Close)
	}
	return b, nil
}

// backendLookup adapts backend to the executors' lookup functions; an open failure is
// logged by the executor as an unknown backend, and tried again on the next command.
func (f *fleet) backendLookup(ctx context.Context) func(string) (adapters.ShardBackend, bool) {
	return func(key string) (adapters.ShardBackend, bool) {
		b, err := f.backend(ctx, key)
		return b, err == nil
	}
}

// shardLister finds the backend of a shard by the latest record's shard name (the in-doubt
// monitor names shards).
func (f *fleet) shardLister(ctx context.Context) func(string) (driver.PreparedLister, bool) {
	return func(name string) (driver.PreparedLister, bool) {
		f.mu.Lock()
		key := f.byName[name]
		f.mu.Unlock()
		b, err := f.backend(ctx, key)
		return b, err == nil
	}
}

func (f *fleet) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.closers {
		c()
	}
	f.closers = nil
	f.open = map[string]adapters.ShardBackend{}
}

// layouts are the record's layout and, during a reshard, its target.
func layouts(rec *shardmap.Record) []shardmap.Layout {
	ls := []shardmap.Layout{rec.Layout}
	if rec.Target != nil {
		ls = append(ls, *rec.Target)
	}
	return ls
}

// opener opens a database's fleet.
type opener func(ctx context.Context, dc *DatabaseConfig) (*fleet, error)

// openFleet is the daemon's opener: PgDog admin databases for routers, Postgres for shards;
// for a Vitess keyspace, vtctld and MySQL (vitess.go).
func openFleet(ctx context.Context, dc *DatabaseConfig) (*fleet, error) {
	f := newFleet()
	for _, rc := range dc.Routers {
		inst, err := pgdog.New(pgdog.Config{ID: rc.ID, Admin: adminDSN(dc, rc), Dir: rc.ConfigDir, Database: dc.Name})
		if err != nil {
			f.close()
			return nil, fmt.Errorf("databases %s router %s: %w", dc.Name, rc.ID, err)
		}
		f.routers[rc.ID], f.resharders[rc.ID] = inst, inst
		f.closers = append(f.closers, func() { _ = inst.Close() })
	}
	if dc.Vitess != nil {
		if err := openVitess(f, dc); err != nil {
			f.close()
			return nil, err
		}
		return f, nil
	}
	if dc.ShardUser != "" {
		f.dial = func(ctx context.Context, b shardmap.Backend) (adapters.ShardBackend, error) {
			return dialShard(ctx, dc, b)
		}
	}
	return f, nil
}

// adminDSN is how the controller reaches a PgDog instance's admin database: the router's
// admin value when it is a connection string, else host:port with the database's admin
// login (admin_user, default "admin", and the password admin_password_env holds).
func adminDSN(dc *DatabaseConfig, rc RouterConfig) string {
	if strings.Contains(rc.Admin, "://") || strings.Contains(rc.Admin, "=") {
		return rc.Admin
	}
	user := dc.AdminUser
	if user == "" {
		user = "admin"
	}
	u := url.URL{Scheme: "postgres", Host: rc.Admin, Path: "/admin", User: url.UserPassword(user, secret(dc.AdminPasswordEnv))}
	return u.String()
}

// shardDSN is how the controller logs into a shard's database: the record's host, port
// and database, the config's shard_user and the password its environment variable holds,
// sslmode verify-full unless shard_sslmode says otherwise.
func shardDSN(dc *DatabaseConfig, b shardmap.Backend) string {
	sslmode := dc.ShardSSLMode
	if sslmode == "" {
		sslmode = "verify-full"
	}
	return pgURL(b.Host, int(b.Port), b.Database, dc.ShardUser, dc.ShardPasswordEnv, sslmode)
}

// pgURL is a libpq connection URL for one of the controller's own logins (sslmode prefer
// unless given; the password read from the environment variable passwordEnv names).
func pgURL(host string, port int, database, user, passwordEnv, sslmode string) string {
	u := url.URL{Scheme: "postgres", Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: "/" + database}
	if pw := secret(passwordEnv); pw != "" {
		u.User = url.UserPassword(user, pw)
	} else {
		u.User = url.User(user)
	}
	if sslmode == "" {
		sslmode = "prefer"
	}
	u.RawQuery = url.Values{"sslmode": {sslmode}, "application_name": {"loamrouter"}}.Encode()
	return u.String()
}
