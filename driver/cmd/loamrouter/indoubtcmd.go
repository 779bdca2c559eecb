package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"loam.dev/router/adapters"
	"loam.dev/router/controller"
	"loam.dev/router/driver"
	"loam.dev/router/machine/indoubt"
)

// preparedRow is one prepared transaction as `indoubt list` shows it.
type preparedRow struct {
	Shard       string `json:"shard"`
	GID         string `json:"gid"`
	Coordinator string `json:"coordinator,omitempty"` // PgDog instance id, "" when not PgDog's
	Txn         string `json:"txn,omitempty"`
	Foreign     string `json:"foreign,omitempty"` // why it is not read as PgDog's
	AgeMS       int64  `json:"age_ms,omitempty"`
	Owner       string `json:"owner,omitempty"`
	Database    string `json:"database,omitempty"`
}

type indoubtReport struct {
	DB       string          `json:"db"`
	Source   string          `json:"source"` // monitor (the daemon's last rounds) or scan
	Round    uint64          `json:"round,omitempty"`
	Prepared []preparedRow   `json:"prepared"`
	Alerts   []indoubt.Alert `json:"alerts"`
	Errors   []string        `json:"errors,omitempty"`
}

func newInDoubtCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{Use: "indoubt", Short: "Prepared transactions left in doubt by two-phase commit, and the monitor's alerts"}
	list := &cobra.Command{
		Use:   "list <db>",
		Short: "List prepared transactions per shard, grouped by coordinator, and the alerts the monitor raised",
		Long: `list shows what the in-doubt monitor of the running controller last saw (its saved
state: every shard's prepared transactions and the alerts raised), or with --scan lists
pg_prepared_xacts on every shard now. Nothing here commits or rolls back a transaction:
without the coordinator's log nobody can know its decision. Resolve by the runbook, with
the shard data in view, using the gid, owner and database shown.`,
		Example: `  loamrouter indoubt list app
  loamrouter indoubt list app --scan --output json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref := c.db(args[0])
			scan, _ := cmd.Flags().GetBool("scan")
			st, err := c.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			dc, _ := c.cfg.Database(ref)
			deployment := ""
			if dc != nil {
				deployment = dc.InDoubt.Deployment
			}
			rep := indoubtReport{DB: ref.String(), Prepared: []preparedRow{}, Alerts: []indoubt.Alert{}}
			now := time.Now().UnixMilli()
			if scan {
				if dc == nil {
					return fmt.Errorf("%s has no [[databases]] table in %s: scanning needs shard_user", ref, c.cfg.Source())
				}
				rep.Source = "scan"
				if err := c.scanPrepared(cmd.Context(), st, ref, dc, &rep, now); err != nil {
					return err
				}
			} else {
				rep.Source = "monitor"
				snap, _, err := controller.GetJSON[indoubt.Snapshot](cmd.Context(), st, driver.SnapshotKey("indoubt", ref.String()))
				if errors.Is(err, adapters.ErrNotFound) {
					return fmt.Errorf("the in-doubt monitor of %s has not run yet (is `loamrouter serve` running with it enabled?); --scan lists the shards now", ref)
				}
				if err != nil {
					return err
				}
				rep.Round, rep.Alerts = snap.Round, append(rep.Alerts, snap.Alerts...)
				for _, sh := range snap.Shards {
					if sh.Err != "" {
						rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %d failed scans, last: %s", sh.Name, sh.Failures, sh.Err))
					}
					for _, x := range sh.Xacts {
						rep.Prepared = append(rep.Prepared, row(sh.Name, x.Xact, deployment, now, x.FirstSeen))
					}
				}
			}
			sort.Slice(rep.Prepared, func(i, j int) bool {
				a, b := rep.Prepared[i], rep.Prepared[j]
				if a.Coordinator != b.Coordinator {
					return a.Coordinator < b.Coordinator
				}
				if a.Txn != b.Txn {
					return a.Txn < b.Txn
				}
				return a.Shard < b.Shard
			})
			return c.emit(cmd.OutOrStdout(), rep, func(w io.Writer) error { rep.print(w); return nil })
		},
	}
	list.Flags().Bool("scan", false, "list pg_prepared_xacts on every shard now instead of reading the monitor's state")
	cmd.AddCommand(list)
	return cmd
}

func row(shard string, x indoubt.Xact, deployment string, now, firstSeen int64) preparedRow {
	r := preparedRow{Shard: shard, GID: x.GID, Owner: x.Owner, Database: x.Database}
	at := x.Prepared
	if at == 0 {
		at = firstSeen
	}
	if at > 0 {
		r.AgeMS = now - at
	}
	g, err := indoubt.ParseGID(x.GID, deployment)
	if err != nil {
		r.Foreign = err.Error()
	} else {
		r.Coordinator, r.Txn = g.Instance, g.Txn
	}
	return r
}

func (c *cli) scanPrepared(ctx context.Context, st Store, ref adapters.DBRef, dc *controller.DatabaseConfig, rep *indoubtReport, now int64) error {
	rec, err := st.Read(ctx, ref)
	if err != nil {
		return fmt.Errorf("%s: %w", ref, err)
	}
	f, err := c.opener()(ctx, dc)
	if err != nil {
		return err
	}
	defer f.Close()
	f.Learn(rec)
	for _, l := range controller.Layouts(rec) {
		for _, s := range l.Shards {
			b, err := f.Backend(ctx, driver.BackendKey(s.Backend))
			if err == nil {
				var xs []adapters.PreparedXact
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				xs, err = b.Prepared(cctx)
				cancel()
				for _, x := range xs {
					var at int64
					if !x.Prepared.IsZero() {
						at = x.Prepared.UnixMilli()
					}
					rep.Prepared = append(rep.Prepared, row(s.Name, indoubt.Xact{GID: x.GID, Prepared: at, Owner: x.Owner, Database: x.Database}, dc.InDoubt.Deployment, now, 0))
				}
			}
			if err != nil {
				rep.Errors = append(rep.Errors, fmt.Sprintf("%s (%s): %v", s.Name, driver.BackendKey(s.Backend), err))
			}
		}
	}
	return nil
}

func (r indoubtReport) print(w io.Writer) {
	src := "the monitor's last scan"
	if r.Source == "scan" {
		src = "a scan just now"
	} else {
		src += fmt.Sprintf(" (round %d)", r.Round)
	}
	fmt.Fprintf(w, "%s: %d prepared transaction(s), %d alert(s), from %s\n", r.DB, len(r.Prepared), len(r.Alerts), src)
	for _, p := range r.Prepared {
		who := "coordinator " + p.Coordinator + " txn " + p.Txn
		if p.Coordinator == "" {
			who = "not PgDog's: " + p.Foreign
		}
		fmt.Fprintf(w, "  %-8s %-40s %s, age %s, owner %s, database %s\n", p.Shard, p.GID, who, dur(p.AgeMS), p.Owner, p.Database)
	}
	for _, a := range r.Alerts {
		fmt.Fprintf(w, "  ALERT %s: %s\n", a.ID, a.String())
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "  cannot see %s\n", e)
	}
	if len(r.Alerts) > 0 {
		fmt.Fprintln(w, "  resolve each with COMMIT PREPARED or ROLLBACK PREPARED on its shard's database, as its owner or a superuser, by the runbook")
	}
}
