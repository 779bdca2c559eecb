package refrouter

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"loam.dev/router/adapters/postgres"
)

// NetLoadOptions describe a write load through router processes (Server), over the wire.
type NetLoadOptions struct {
	// Routers lists the instances: id and address (host:port) of each; worker w writes
	// through Routers[w mod len(Routers)].
	Routers []NetRouter
	// Database, User and Password are the clients' login (a users.toml user of Database).
	Database, User, Password string
	// Workers, Table, KeyBase and Pace: as in LoadOptions.
	Workers int
	Table   string
	KeyBase int64
	Pace    time.Duration
}

// NetRouter is one router process a load writes through.
type NetRouter struct{ ID, Addr string }

// StartNetLoad starts opts.Workers clients, each on a connection of its own to its router,
// writing one row per statement (the key named in the statement's comment) until Stop or
// ctx ends. A write is acknowledged when the router answered CommandComplete; refused by
// the fence when it relayed SQLSTATE 28000 or 57P01 (Write.Fenced); a broken connection
// fails the write and is dialled again.
func StartNetLoad(ctx context.Context, opts NetLoadOptions) *Load {
	ctx, cancel := context.WithCancel(ctx)
	l := &Load{cancel: cancel}
	for w := range opts.Workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			rt := opts.Routers[w%len(opts.Routers)]
			u := url.URL{Scheme: "postgres", User: url.UserPassword(opts.User, opts.Password), Host: rt.Addr, Path: "/" + opts.Database,
				RawQuery: "sslmode=disable&application_name=" + url.QueryEscape(fmt.Sprintf("netload %d", w))}
			var conn *pgconn.PgConn
			defer func() {
				if conn != nil {
					conn.Close(context.Background())
				}
			}()
			for seq := int64(1); ctx.Err() == nil; seq++ {
				key := opts.KeyBase + int64(w)<<32 + seq
				wr := Write{Worker: w, Seq: seq, Key: key, Router: rt.ID, Start: time.Now()}
				if conn == nil || conn.IsClosed() {
					cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
					conn, wr.Err = pgconn.Connect(cctx, u.String())
					ccancel()
				}
				if wr.Err == nil {
					sql, _ := WithShardingKey(key, fmt.Sprintf("INSERT INTO %s (id, worker, seq, router) VALUES (%d, %d, %d, '%s')",
						pgx.Identifier{opts.Table}.Sanitize(), key, w, seq, rt.ID))
					var res []*pgconn.Result
					res, wr.Err = conn.Exec(ctx, sql).ReadAll()
					if wr.Err == nil && len(res) > 0 {
						wr.Result.Tag = res[0].CommandTag
					}
					wr.Err = netError(rt.ID, wr.Err)
				} else {
					conn = nil
				}
				wr.Latency = time.Since(wr.Start)
				l.mu.Lock()
				l.writes = append(l.writes, wr)
				l.mu.Unlock()
				pace := opts.Pace
				if wr.Err != nil && pace < time.Millisecond {
					pace = time.Millisecond
				}
				if pace > 0 {
					select {
					case <-ctx.Done():
					case <-time.After(pace):
					}
				}
			}
		}()
	}
	return l
}

// netError classifies a statement's error as Exec does: the router relays the shard's
// SQLSTATE, so a fence is errors.Is(err, adapters.ErrFenced).
func netError(router string, err error) error {
	var pe *pgconn.PgError
	if err == nil || !errors.As(err, &pe) {
		return err
	}
	return postgres.Classify(router, "Exec", err)
}
