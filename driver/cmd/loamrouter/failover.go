package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"loam.dev/router/adapters"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine/configpush"
	"loam.dev/router/machine/failover"
)

// A failover is asked for like a cutover: `failover` writes a request blob, the active
// controller runs it to its end and files the outcome in the history.

func failoverRequestKey(ref adapters.DBRef) string { return "request/failover/" + ref.String() }
func failoverHistoryKey(ref adapters.DBRef, at int64) string {
	return fmt.Sprintf("history/failover/%s/%020d", ref, at)
}

type failoverRequest struct {
	Shard    string           `json:"shard"`
	Promoted shardmap.Backend `json:"promoted"`
	By       string           `json:"by"`
	At       int64            `json:"at"`
}

type failoverResult struct {
	Request    failoverRequest `json:"request"`
	Outcome    string          `json:"outcome"`
	Generation uint64          `json:"generation"`
	Fenced     bool            `json:"fenced"`
	Reason     string          `json:"reason,omitempty"`
	Ended      int64           `json:"ended"`
}

// runFailovers runs failover requests of the database one at a time until ctx ends or the
// daemon drains. pushes is the database's ConfigPush input, which a PgDog failover hands
// its new generation to.
func (d *daemon) runFailovers(ctx context.Context, dc *DatabaseConfig, ref adapters.DBRef, f *fleet, pushes chan<- configpush.Input, log *slog.Logger) {
	poll := d.poll
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	for {
		req, _, err := getJSON[failoverRequest](ctx, d.store, failoverRequestKey(ref))
		switch {
		case err == nil:
			d.runFailover(ctx, dc, ref, f, req, pushes, log.With("machine", "failover"))
		case !errors.Is(err, adapters.ErrNotFound) && ctx.Err() == nil:
			log.Warn("reading the failover request failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-d.drain:
			return
		case <-time.After(poll):
		}
	}
}

func (d *daemon) runFailover(ctx context.Context, dc *DatabaseConfig, ref adapters.DBRef, f *fleet, req failoverRequest, pushes chan<- configpush.Input, log *slog.Logger) {
	var start []failover.Input
	if _, err := d.store.GetBlob(ctx, driver.SnapshotKey("failover", ref.String())); errors.Is(err, adapters.ErrNotFound) {
		rec, err := d.store.Read(ctx, ref)
		if err != nil {
			log.Error("cannot read the record to start the failover", "err", err)
			return
		}
		start = []failover.Input{failover.Start{Record: rec, Shard: req.Shard, Promoted: req.Promoted, Role: dc.AppUser}}
	} else if err != nil {
		log.Error("reading the failover snapshot failed", "err", err)
		return
	}
	handoff := &driver.PushHandoff{Inputs: pushes, Store: d.store, ID: ref.String(),
		Render:    func(r *shardmap.Record) (render.Files, error) { return renderFiles(r, dc) },
		Instances: func() []string { return routerIDs(dc) }}
	var done failover.Done
	var once sync.Once
	finished := make(chan struct{})
	exec := &driver.FailoverExecutor{DB: ref, Store: d.guarded, Backend: f.backendLookup(ctx), Handoff: handoff.Hand, Logger: log,
		Vitess: f.vitess, OnDone: func(c failover.Done) { once.Do(func() { done = c; close(finished) }) }}
	if len(dc.Routers) == 0 {
		exec.Handoff = func(context.Context, *shardmap.Record) error { return nil } // no router to push to
	}
	audited := &driver.Audited[failover.Input, failover.Command]{Kind: "failover", ID: ref.String(), Next: exec, Audit: d.audit, Valid: d.lease.Valid,
		OnResult: func(c failover.Command, in failover.Input, e driver.AuditEntry) { d.m.step("failover", e) }}
	inputs := make(chan failover.Input)
	go func() {
		select {
		case <-finished:
			close(inputs)
		case <-ctx.Done():
		}
	}()
	d.keepRunning(ctx, log, "failover", func() error {
		err := driver.Run(ctx, driver.Failover(audited), driver.Config[failover.Input]{
			ID: ref.String(), Store: d.guarded, Logger: log, Inputs: inputs, Drain: d.drain,
		}, start...)
		start = nil
		return err
	})
	select {
	case <-finished:
	default:
		return
	}
	res := failoverResult{Request: req, Outcome: done.Outcome.String(), Generation: done.Generation, Fenced: done.Fenced, Reason: done.Reason, Ended: time.Now().UnixMilli()}
	data, _ := json.Marshal(res)
	if _, err := d.guarded.PutBlob(ctx, failoverHistoryKey(ref, req.At), 0, data); err != nil && !errors.Is(err, adapters.ErrConflict) {
		log.Error("filing the failover failed", "err", err)
		return
	}
	for _, key := range []string{driver.SnapshotKey("failover", ref.String()), failoverRequestKey(ref)} {
		if b, err := d.store.GetBlob(ctx, key); err == nil {
			_ = d.guarded.DeleteBlob(ctx, key, b.Version)
		}
	}
	_ = d.audit.Append(ctx, driver.AuditEntry{Event: driver.AuditAction, Machine: "failover", ID: ref.String(),
		What: fmt.Sprintf("failover of %s ended: %s at generation %d (old primary fenced: %v) %s", req.Shard, res.Outcome, res.Generation, res.Fenced, res.Reason), Result: "ok"})
}

// parseEndpoint reads host:port[/database].
func parseEndpoint(s, defaultDB string) (shardmap.Backend, error) {
	hostport, db, _ := strings.Cut(s, "/")
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return shardmap.Backend{}, fmt.Errorf("%q: want host:port[/database] (%v)", s, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return shardmap.Backend{}, fmt.Errorf("%q: port %q is not a TCP port", s, port)
	}
	if !shardmap.IsHost(host) {
		return shardmap.Backend{}, fmt.Errorf("%q: host %q must be a DNS name or an IP address (no , @ / ? or brackets)", s, host)
	}
	if db == "" {
		db = defaultDB
	}
	return shardmap.Backend{Host: host, Port: uint16(p), Database: db}, nil
}

func newFailoverCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "failover <db> --shard <name> --to host:port[/database]",
		Short: "Repoint a shard to its promoted primary: fence the old one, store a new generation, push it",
		Long: `failover asks the running controller to repoint a shard whose primary was promoted away:
fence the old primary (when it answers; usually it is why), store the promoted primary in the
record at a new generation by compare-and-set, and push that generation to every router
(PgDog) or reparent through vtctld (Vitess). With --wait it waits for the outcome.`,
		Example: `  loamrouter failover app --shard s1 --to 10.0.0.22:5432
  loamrouter failover app --shard s1 --to 10.0.0.22:5432/app --wait
  loamrouter failover customer --shard -80 --to 10.0.1.5:3306 --tablet zone1-0000000201`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			shard, _ := cmd.Flags().GetString("shard")
			to, _ := cmd.Flags().GetString("to")
			tablet, _ := cmd.Flags().GetString("tablet")
			wait, _ := cmd.Flags().GetDuration("wait")
			if shard == "" || to == "" {
				return errors.New("give --shard (the record's shard name) and --to (the promoted primary, host:port[/database])")
			}
			st, err := c.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			ref := c.db(args[0])
			rec, err := st.Read(cmd.Context(), ref)
			if err != nil {
				return fmt.Errorf("%s: %w", ref, err)
			}
			var cur *shardmap.Shard
			for _, l := range layouts(rec) {
				for i := range l.Shards {
					if l.Shards[i].Name == shard {
						cur = &l.Shards[i]
					}
				}
			}
			if cur == nil {
				return fmt.Errorf("%s has no shard %q (see `loamrouter map show %s`)", ref, shard, args[0])
			}
			promoted, err := parseEndpoint(to, cur.Backend.Database)
			if err != nil {
				return fmt.Errorf("--to %w", err)
			}
			promoted.Tablet = tablet
			req := failoverRequest{Shard: shard, Promoted: promoted, By: c.who(), At: time.Now().UnixMilli()}
			if err := putJSON(cmd.Context(), st, failoverRequestKey(ref), 0, req); err != nil {
				if errors.Is(err, adapters.ErrConflict) {
					return fmt.Errorf("a failover of %s is already running; wait for it (`loamrouter audit --machine failover`)", ref)
				}
				return err
			}
			_ = c.audit(st).Append(cmd.Context(), driver.AuditEntry{Event: driver.AuditAction, Machine: "failover", ID: ref.String(),
				What: fmt.Sprintf("failover requested: %s %s → %s", shard, driver.BackendKey(cur.Backend), driver.BackendKey(promoted)), Result: "ok"})
			if wait <= 0 {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "requested: the controller repoints %s of %s to %s\n", shard, ref, driver.BackendKey(promoted))
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), wait)
			defer cancel()
			for {
				res, _, err := getJSON[failoverResult](ctx, st, failoverHistoryKey(ref, req.At))
				if err == nil {
					return c.emit(cmd.OutOrStdout(), res, func(w io.Writer) error {
						_, err := fmt.Fprintf(w, "failover of %s: %s at generation %d (old primary fenced: %v)%s\n", shard, res.Outcome, res.Generation, res.Fenced, prefixed(" ", res.Reason))
						return err
					})
				}
				select {
				case <-ctx.Done():
					return fmt.Errorf("no outcome within %v; the request stays and the controller carries on (is `loamrouter serve` running?)", wait)
				case <-time.After(200 * time.Millisecond):
				}
			}
		},
	}
	cmd.Flags().String("shard", "", "the shard to repoint (its name in the record)")
	cmd.Flags().String("to", "", "the promoted primary, host:port[/database]")
	cmd.Flags().String("tablet", "", "the promoted primary's Vitess tablet alias (Vitess keyspaces)")
	cmd.Flags().Duration("wait", 0, "wait up to this long for the outcome (e.g. 1m)")
	return cmd
}

func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}
