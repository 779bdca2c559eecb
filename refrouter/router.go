package refrouter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/configmap"
	"loam.dev/router/kernel/render"
)

// Version is what Observe reports as the router's version.
const Version = "refrouter"

// ErrGenerationMismatch: Apply loaded the files, but they do not carry the generation it
// was asked to apply (or carry none). The router routes by the files it loaded.
var ErrGenerationMismatch = errors.New("refrouter: the loaded files carry another generation")

// Options configure one router instance.
type Options struct {
	// ID names the instance.
	ID string
	// Dir holds the instance's pgdog.toml and users.toml: Open and Reload read them, Apply
	// writes them first, as PgDog's RELOAD re-reads the files it was started with. It is
	// laid out by adapters/configmap: the two names are links into the generation in place.
	Dir string
	// Target, when set, is where Apply writes instead of a configmap.Dir on Dir (the one
	// target of a directory several instances share). Its WriteFiles must have put the
	// files in Dir by the time it returns.
	Target adapters.ConfigTarget
	// Database is the database its clients use (the record's router name).
	Database string
	// User is the user its clients log in as; the router connects to the shards as this
	// user with the password users.toml gives it on Database (or the [[databases]] entry's
	// own user and password), so a fence on that role in the backend stops this router.
	User string
	// MaxConns bounds the connections to each shard (default 4).
	MaxConns int32
	// ConnectTimeout bounds one connection attempt to a shard (default 5s).
	ConnectTimeout time.Duration
}

// Router is one reference router instance: an adapters.RouterInstance that routes client
// statements (Exec) over pgx pools, one per shard primary of the generation it loaded.
type Router struct {
	opts Options

	mu     sync.Mutex
	topo   *Topology
	pools  map[poolKey]*pool
	gates  map[string]chan struct{} // paused databases; "" pauses every database
	held   int
	cut    bool
	closed bool
	done   chan struct{} // closed by Close: held statements give up
}

var _ adapters.RouterInstance = (*Router)(nil)

type poolKey struct {
	backend        Backend
	user, password string
}

// pool is a shard's connection pool, counted so that a reload that drops the shard closes
// it only once the statements using it are done.
type pool struct {
	p       *pgxpool.Pool
	refs    int
	retired bool
}

// Open starts an instance: it reads the files in opts.Dir, as a restarted PgDog does.
// Connections are made when statements need them.
func Open(opts Options) (*Router, error) {
	if opts.ID == "" || opts.Dir == "" || opts.Database == "" || opts.User == "" {
		return nil, errors.New("refrouter: Options need ID, Dir, Database and User")
	}
	if opts.Target == nil {
		d, err := configmap.NewDir(opts.Dir)
		if err != nil {
			return nil, fmt.Errorf("refrouter: instance %s: %w", opts.ID, err)
		}
		opts.Target = d
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = 4
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 5 * time.Second
	}
	r := &Router{opts: opts, pools: map[poolKey]*pool{}, gates: map[string]chan struct{}{}, done: make(chan struct{})}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

// ID implements adapters.RouterInstance.
func (r *Router) ID() string { return r.opts.ID }

// Dir is the directory the instance reads its files from.
func (r *Router) Dir() string { return r.opts.Dir }

// Options returns the options the instance was opened with (to open it again: a restart).
func (r *Router) Options() Options { return r.opts }

// Target is where Apply writes the instance's files: Options.Target, or the configmap.Dir
// on Dir that Open made. Writing there without Apply is what a ConfigMap update is to a
// pod: the files change, the instance reloads only when told to or when it restarts.
func (r *Router) Target() adapters.ConfigTarget { return r.opts.Target }

// load reads the files and swaps routing to them; on any error the old routing stays.
func (r *Router) load() error {
	t, err := ReadDir(r.opts.Dir)
	if err != nil {
		return err
	}
	next := map[poolKey]*pool{}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return adapters.ErrClosed
	}
	for _, name := range t.Names() {
		db := t.Databases[name]
		for _, b := range db.Shards {
			if b == nil {
				continue
			}
			k, ok := r.poolKey(db, b)
			if !ok {
				continue
			}
			if p := r.pools[k]; p != nil {
				next[k] = p // same server and login: keep its connections, as PgDog moves them
				continue
			}
			if next[k] != nil {
				continue
			}
			p, err := r.newPool(k)
			if err != nil {
				for k2, p2 := range next {
					if r.pools[k2] == nil {
						p2.p.Close()
					}
				}
				return err
			}
			next[k] = &pool{p: p}
		}
	}
	for k, p := range r.pools {
		if next[k] == nil {
			p.retired = true
			if p.refs == 0 {
				go p.p.Close()
			}
		}
	}
	r.topo, r.pools = t, next
	return nil
}

// poolKey is the login a statement for db on b uses; ok is false when there is none (the
// router's user has no entry on db and the server entry names no user).
func (r *Router) poolKey(db *Database, b *Backend) (poolKey, bool) {
	if b.User != "" {
		return poolKey{*b, b.User, b.Password}, true
	}
	pw, ok := db.Users[r.opts.User]
	if !ok {
		return poolKey{}, false
	}
	return poolKey{*b, r.opts.User, pw}, true
}

func (r *Router) newPool(k poolKey) (*pgxpool.Pool, error) {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(k.user, k.password),
		Host: net.JoinHostPort(k.backend.Host, strconv.Itoa(int(k.backend.Port))), Path: "/" + k.backend.Database,
		RawQuery: "sslmode=disable&application_name=" + url.QueryEscape("refrouter "+r.opts.ID)}
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		return nil, fmt.Errorf("refrouter: connection settings for %s: %w", k.backend.String(), err)
	}
	cfg.MaxConns = r.opts.MaxConns
	cfg.MinConns = 0
	cfg.ConnConfig.ConnectTimeout = r.opts.ConnectTimeout
	return pgxpool.NewWithConfig(context.Background(), cfg)
}

// Reload re-reads the files, as PgDog's RELOAD does. If they cannot be routed by, the
// error wraps ErrBadFiles and the instance keeps the routing it had.
func (r *Router) Reload(ctx context.Context) error {
	if err := r.reachable("Reload"); err != nil {
		return err
	}
	if err := r.load(); err != nil {
		return &adapters.RouterError{Instance: r.opts.ID, Op: "Reload", Err: err}
	}
	return nil
}

// Apply implements adapters.RouterInstance: write the files as generation through Target
// (all at once; a generation older than the one in place is refused with an error matching
// adapters.ErrNewerGeneration, and nothing is reloaded), then reload. The generation it
// reports is the one the loaded files carry (their marker, render.GenerationDatabase); if
// that is not generation, the files are loaded all the same and the error wraps
// ErrGenerationMismatch.
func (r *Router) Apply(ctx context.Context, generation uint64, files render.Files) (adapters.Applied, error) {
	if err := r.reachable("Apply"); err != nil {
		return adapters.Applied{}, err
	}
	if err := r.opts.Target.WriteFiles(ctx, generation, files); err != nil {
		return adapters.Applied{}, &adapters.RouterError{Instance: r.opts.ID, Op: "Apply", Err: err}
	}
	if err := r.load(); err != nil {
		return adapters.Applied{}, &adapters.RouterError{Instance: r.opts.ID, Op: "Apply", Err: err}
	}
	g, known := r.Generation()
	if !known || g != generation {
		got := "no generation marker"
		if known {
			got = "generation " + strconv.FormatUint(g, 10)
		}
		return adapters.Applied{Generation: g}, &adapters.RouterError{Instance: r.opts.ID, Op: "Apply",
			Err: fmt.Errorf("%w: asked for generation %d, the files for %q carry %s", ErrGenerationMismatch, generation, r.opts.Database, got)}
	}
	return adapters.Applied{Generation: g}, nil
}

// Generation is the generation of the loaded files for the instance's database.
func (r *Router) Generation() (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.topo.Generation(r.opts.Database)
}

// Pause implements adapters.RouterInstance (PgDog: PAUSE <db>; an empty database pauses
// every database, as a bare PAUSE does). Statements for a paused database wait in Exec, in
// no particular order, until Resume; statements already running finish. As PgDog closes a
// paused pool's idle server connections, the database's pools are reset: idle connections
// close now, busy ones when their statement is done, and Resume starts on new sessions, so
// that a fence raised and lowered while paused (a rolled-back cutover) is not seen by the
// statements it held.
func (r *Router) Pause(ctx context.Context, database string) error {
	if err := r.reachable("Pause"); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gates[database] == nil {
		r.gates[database] = make(chan struct{})
	}
	r.resetPools(database)
	return nil
}

// resetPools resets the pools of database's shards (every database's for ""): idle
// connections close now, busy ones when they are released. r.mu is held.
func (r *Router) resetPools(database string) {
	for _, name := range r.topo.Names() {
		if database != "" && name != database {
			continue
		}
		d := r.topo.Databases[name]
		for _, b := range d.Shards {
			if b == nil {
				continue
			}
			if k, ok := r.poolKey(d, b); ok {
				r.pools[k].p.Reset()
			}
		}
	}
}

// Resume implements adapters.RouterInstance (PgDog: RESUME <db>; an empty database resumes
// every database). Held statements are routed when released, by the routing loaded then,
// on sessions opened after the Resume: the pools are reset again, since a statement that
// was running when the PAUSE came may have opened a session after the Pause's reset and
// left it idle, and a fence raised while paused may have ended it (the held statement
// would then fail with 57P01, as if fenced).
func (r *Router) Resume(ctx context.Context, database string) error {
	if err := r.reachable("Resume"); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resetPools(database)
	if database == "" {
		for db, g := range r.gates {
			close(g)
			delete(r.gates, db)
		}
		return nil
	}
	if all := r.gates[""]; all != nil {
		// Pools of the other databases stay paused, as they would in PgDog.
		for _, db := range r.topo.Names() {
			if db != database && r.gates[db] == nil {
				r.gates[db] = make(chan struct{})
			}
		}
		close(all)
		delete(r.gates, "")
	}
	if g := r.gates[database]; g != nil {
		close(g)
		delete(r.gates, database)
	}
	return nil
}

// Observe implements adapters.RouterInstance.
func (r *Router) Observe(ctx context.Context) (adapters.Observed, error) {
	if err := r.reachable("Observe"); err != nil {
		return adapters.Observed{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	o := adapters.Observed{Version: Version}
	o.Generation, o.GenerationKnown = r.topo.Generation(r.opts.Database)
	paused := map[string]bool{}
	for db := range r.gates {
		if db != "" {
			paused[db] = true
			continue
		}
		for _, name := range r.topo.Names() {
			paused[name] = true
		}
	}
	o.Paused = slices.Sorted(maps.Keys(paused))
	return o, nil
}

// Swap exchanges the names of databases a and b in the instance's memory, users included,
// as PgDog's CUTOVER does (Config::cutover, Users::cutover in pgdog.md): clients of a are
// routed to what the files call b, and the other way round. The files are not touched,
// so a reload or a restart undoes it. A statement held by a pause is routed after the swap
// when it is released.
func (r *Router) Swap(a, b string) error {
	if err := r.reachable("Cutover"); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	da, db := r.topo.Databases[a], r.topo.Databases[b]
	if da == nil || db == nil {
		return &adapters.RouterError{Instance: r.opts.ID, Op: "Cutover",
			Err: fmt.Errorf("refrouter: cannot swap %q and %q: both must be loaded (loaded: %v)", a, b, r.topo.Names())}
	}
	t := &Topology{Databases: maps.Clone(r.topo.Databases), markers: r.topo.markers, Admin: r.topo.Admin}
	na, nb := *db, *da
	na.Name, nb.Name = a, b
	t.Databases[a], t.Databases[b] = &na, &nb
	r.topo = t
	return nil
}

// Held is how many statements are waiting for a Resume.
func (r *Router) Held() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}

// SetUnreachable cuts (or restores) the instance's control plane: while cut, Apply, Reload,
// Pause, Resume and Observe fail with adapters.ErrUnreachable and change nothing, but
// clients' statements still flow by whatever routing the instance has. This is the
// instance a cutover cannot reach: the backend fence is what keeps it off the old shards.
func (r *Router) SetUnreachable(cut bool) {
	r.mu.Lock()
	r.cut = cut
	r.mu.Unlock()
}

func (r *Router) reachable(op string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
		return &adapters.RouterError{Instance: r.opts.ID, Op: op, Err: adapters.ErrClosed}
	case r.cut:
		return &adapters.RouterError{Instance: r.opts.ID, Op: op,
			Err: fmt.Errorf("%w: the instance's control plane is cut (SetUnreachable)", adapters.ErrUnreachable)}
	}
	return nil
}

// Close stops the instance: held statements fail with adapters.ErrClosed, and the pools
// close once running statements are done. A closed instance can be opened again from the
// same Options (Open), which is a restart: it reads its files and forgets its pauses.
func (r *Router) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	close(r.done)
	var idle []*pgxpool.Pool
	for _, p := range r.pools {
		p.retired = true
		if p.refs == 0 {
			idle = append(idle, p.p)
		}
	}
	r.mu.Unlock()
	for _, p := range idle {
		p.Close()
	}
}
