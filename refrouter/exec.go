package refrouter

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/postgres"
)

// Result says where a statement went and what the shard answered.
type Result struct {
	// Generation is the generation of the routing the statement was sent by (0 when the
	// loaded files carry no generation marker).
	Generation uint64
	Shard      int
	Backend    string // host:port/database
	Tag        pgconn.CommandTag
}

// Exec runs one statement for the instance's database on the shard key routes to, as
// PgDog routes a statement whose sharding column equals key. While the database is paused
// it waits (or gives up with ctx); the shard is chosen when it is released, by the
// routing loaded then.
//
// Errors: ErrNoRoute for a key with no single shard; adapters.ErrClosed after Close; the
// shard's own errors as *adapters.BackendError keeping the SQLSTATE (postgres.Classify), with
// errors.Is(err, adapters.ErrFenced) true for a login refused because the role is NOLOGIN
// (28000) and a session terminated (57P01), the two ways a backend fence refuses a router
// that still routes to it.
func (r *Router) Exec(ctx context.Context, key any, sql string, args ...any) (Result, error) {
	rt, err := r.route(ctx, key)
	if err != nil {
		return Result{}, err
	}
	defer r.release(rt.pool)
	res := Result{Generation: rt.gen, Shard: rt.shard, Backend: rt.backend.String()}
	res.Tag, err = rt.pool.p.Exec(ctx, sql, args...)
	if err != nil {
		return res, backendError(rt.backend, "Exec", err)
	}
	return res, nil
}

// Query runs a query like Exec and hands the rows to scan, which must read them before
// returning.
func (r *Router) Query(ctx context.Context, key any, scan func(pgx.Rows) error, sql string, args ...any) (Result, error) {
	rt, err := r.route(ctx, key)
	if err != nil {
		return Result{}, err
	}
	defer r.release(rt.pool)
	res := Result{Generation: rt.gen, Shard: rt.shard, Backend: rt.backend.String()}
	rows, err := rt.pool.p.Query(ctx, sql, args...)
	if err != nil {
		return res, backendError(rt.backend, "Query", err)
	}
	defer rows.Close()
	if err := scan(rows); err != nil {
		return res, err
	}
	rows.Close()
	res.Tag = rows.CommandTag()
	if err := rows.Err(); err != nil {
		return res, backendError(rt.backend, "Query", err)
	}
	return res, nil
}

// backendError classifies a shard's error as adapters/postgres does for the control plane,
// so a client of the router branches on a fence the same way.
func backendError(b Backend, op string, err error) error {
	return postgres.Classify(b.String(), op, err)
}

type route struct {
	gen     uint64
	shard   int
	backend Backend
	pool    *pool
}

// route waits while the database is paused, then picks the shard and takes a reference on
// its pool, all under one lock so that a statement released by Resume sees the routing
// loaded before the Resume.
func (r *Router) route(ctx context.Context, key any) (route, error) {
	db := r.opts.Database
	r.mu.Lock()
	for {
		if r.closed {
			r.mu.Unlock()
			return route{}, fmt.Errorf("refrouter %s: %w", r.opts.ID, adapters.ErrClosed)
		}
		gate := r.gates[db]
		if gate == nil {
			gate = r.gates[""]
		}
		if gate == nil {
			break
		}
		r.held++
		r.mu.Unlock()
		var err error
		select {
		case <-gate:
		case <-r.done:
		case <-ctx.Done():
			err = ctx.Err()
		}
		r.mu.Lock()
		r.held--
		if err != nil {
			r.mu.Unlock()
			return route{}, fmt.Errorf("refrouter %s: waiting while %q is paused: %w", r.opts.ID, db, err)
		}
	}
	defer r.mu.Unlock()
	d := r.topo.Databases[db]
	if d == nil {
		return route{}, fmt.Errorf("%w: refrouter %s has no database %q loaded", ErrNoRoute, r.opts.ID, db)
	}
	shard, err := d.Shard(key)
	if err != nil {
		return route{}, err
	}
	b := d.Shards[shard]
	if b == nil {
		return route{}, fmt.Errorf("%w: shard %d of %q has no primary in the loaded files", ErrNoRoute, shard, db)
	}
	k, ok := r.poolKey(d, b)
	if !ok {
		return route{}, fmt.Errorf("%w: users.toml has no user %q on %q", ErrNoRoute, r.opts.User, db)
	}
	p := r.pools[k]
	p.refs++
	gen, _ := r.topo.Generation(db)
	return route{gen: gen, shard: shard, backend: *b, pool: p}, nil
}

func (r *Router) release(p *pool) {
	r.mu.Lock()
	p.refs--
	closeIt := p.retired && p.refs == 0
	r.mu.Unlock()
	if closeIt {
		go p.p.Close()
	}
}
