package controller

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/pgdog"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
)

// Fleet is what one database's machines act on: its router instances, the resharding
// commands of those that can reshard, the servers of its shards (opened when first needed:
// a reshard brings new shards) and where its rendered files go. An Opener builds one per
// database when the controller starts leading; the controller closes it when it stops.
type Fleet struct {
	// Routers are the database's router instances by id (a ConfigPush reloads each).
	Routers map[string]adapters.RouterInstance
	// Resharders are the instances that can run a cutover's copy, by id.
	Resharders map[string]adapters.Resharder
	// Dial opens a shard's server (nil: the database has no shard access, and the
	// in-doubt monitor, fences and failovers fail saying so).
	Dial func(ctx context.Context, b shardmap.Backend) (adapters.ShardBackend, error)
	// Vitess is vtctld, for a database routed by Vitess (nil otherwise); Workflows is
	// vtctld's workflow API, which a Vitess cutover (machine/vreshard) drives, and Vtgate a
	// pool of vtgate's MySQL protocol it checks the target shards through (nil without
	// [databases.vitess] vtgate).
	Vitess    adapters.VitessControl
	Workflows adapters.VitessWorkflows
	Vtgate    *sql.DB
	// Target is where the rendered files go before every reload (nil: files_dir).
	Target adapters.ConfigTarget
	// FilesSeen, when set, says which generation of the files router id sees where it
	// reads them (on Kubernetes the kubelet projects the ConfigMap into a pod up to a
	// minute or more after the write): ConfigPush then reloads an instance only once it
	// sees the pushed generation (configpush.Options.AwaitFiles).
	FilesSeen func(ctx context.Context, id string) (uint64, error)
	// Roster, when set, is the in-doubt monitor's roster of router processes (nil: the
	// routers' node_id, no start times). On Kubernetes: the PgDog StatefulSet's pods.
	Roster adapters.Roster

	mu      sync.Mutex
	known   map[string]shardmap.Backend // by driver.BackendKey, from every record seen
	byName  map[string]string           // shard name → backend key, of the latest record
	open    map[string]adapters.ShardBackend
	closers []func()
}

// NewFleet is an empty fleet to fill in.
func NewFleet() *Fleet {
	return &Fleet{Routers: map[string]adapters.RouterInstance{}, Resharders: map[string]adapters.Resharder{},
		known: map[string]shardmap.Backend{}, byName: map[string]string{}, open: map[string]adapters.ShardBackend{}}
}

// Learn records the shards of a record (its layout and, during a reshard, its target).
func (f *Fleet) Learn(rec *shardmap.Record) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byName = map[string]string{}
	for _, l := range Layouts(rec) {
		for _, s := range l.Shards {
			k := driver.BackendKey(s.Backend)
			f.known[k] = s.Backend
			f.byName[s.Name] = k
		}
	}
}

// Backend returns the server behind key (a driver.BackendKey), opening it on first use.
func (f *Fleet) Backend(ctx context.Context, key string) (adapters.ShardBackend, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.open[key]; ok {
		return b, nil
	}
	be, ok := f.known[key]
	if !ok {
		return nil, fmt.Errorf("%w %s (in no record this controller has seen)", driver.ErrUnknownBackend, key)
	}
	if f.Dial == nil {
		return nil, fmt.Errorf("shard %s: no Postgres access configured (set databases.shard_user)", key)
	}
	b, err := f.Dial(ctx, be)
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
func (f *Fleet) backendLookup(ctx context.Context) func(string) (adapters.ShardBackend, bool) {
	return func(key string) (adapters.ShardBackend, bool) {
		b, err := f.Backend(ctx, key)
		return b, err == nil
	}
}

// shardLister finds the backend of a shard by the latest record's shard name (the in-doubt
// monitor names shards).
func (f *Fleet) shardLister(ctx context.Context) func(string) (driver.PreparedLister, bool) {
	return func(name string) (driver.PreparedLister, bool) {
		f.mu.Lock()
		key := f.byName[name]
		f.mu.Unlock()
		b, err := f.Backend(ctx, key)
		return b, err == nil
	}
}

// OnClose runs fn when the fleet is closed (an opened router's connection).
func (f *Fleet) OnClose(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closers = append(f.closers, fn)
}

// Close closes every shard server it opened and runs the OnClose functions.
func (f *Fleet) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.closers {
		c()
	}
	f.closers = nil
	f.open = map[string]adapters.ShardBackend{}
}

// Layouts are the record's layout and, during a reshard, its target.
func Layouts(rec *shardmap.Record) []shardmap.Layout {
	ls := []shardmap.Layout{rec.Layout}
	if rec.Target != nil {
		ls = append(ls, *rec.Target)
	}
	return ls
}

// Opener opens a database's fleet.
type Opener func(ctx context.Context, dc *DatabaseConfig) (*Fleet, error)

// OpenFleet is the default Opener: PgDog admin databases for routers, Postgres for shards;
// for a Vitess keyspace, vtctld and MySQL (vitess.go).
//
// With a target other than files ([databases.target] kind), the routers' Apply writes
// nothing: the fleet's Target puts the files in place (the kubelet projects them into the
// pods), and RELOAD is confirmed only when SHOW POOLS shows the generation.
func OpenFleet(ctx context.Context, dc *DatabaseConfig) (*Fleet, error) {
	f := NewFleet()
	for _, rc := range dc.Routers {
		pc := pgdog.Config{ID: rc.ID, Admin: adminDSN(dc, rc), Dir: rc.ConfigDir, Database: dc.Name}
		if dc.Target.Kind != "" && dc.Target.Kind != TargetFiles {
			pc.Dir, pc.Target = "", placedByTarget{dc.Target.Kind}
		}
		inst, err := pgdog.New(pc)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("databases %s router %s: %w", dc.Name, rc.ID, err)
		}
		f.Routers[rc.ID], f.Resharders[rc.ID] = inst, inst
		f.closers = append(f.closers, func() { _ = inst.Close() })
	}
	if dc.Vitess != nil {
		if err := openVitess(f, dc); err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
	if dc.ShardUser != "" {
		f.Dial = func(ctx context.Context, b shardmap.Backend) (adapters.ShardBackend, error) {
			return DialShard(ctx, dc, b)
		}
	}
	return f, nil
}

// placedByTarget is a router's files when the database's target puts them where the
// router reads them (a ConfigMap the kubelet projects): the router's Apply writes nothing,
// it reloads. It cannot know the files arrived: ConfigPush's AwaitFiles (when the fleet
// has FilesSeen) holds the RELOAD until they did, and the adapter's SHOW POOLS check
// (pgdog.ErrNotLoaded, retried) keeps a RELOAD of old files from being confirmed.
type placedByTarget struct{ kind string }

func (placedByTarget) WriteFiles(context.Context, uint64, render.Files) error { return nil }

func (p placedByTarget) String() string { return "the files the " + p.kind + " target put in place" }

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
