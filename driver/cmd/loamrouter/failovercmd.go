package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"loam.dev/router/adapters"
	"loam.dev/router/controller"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine/failover"
)

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
			promoted, err := parseEndpoint(to, "")
			if err != nil {
				return fmt.Errorf("--to %w", err)
			}
			promoted.Tablet = tablet
			req, err := c.requests(st).Failover(cmd.Context(), ref, shard, promoted)
			switch {
			case errors.Is(err, controller.ErrNoShard):
				return fmt.Errorf("%s has no shard %q (see `loamrouter map show %s`)", ref, shard, args[0])
			case errors.Is(err, adapters.ErrConflict):
				return fmt.Errorf("a failover of %s is already running; wait for it (`loamrouter audit --machine failover`)", ref)
			case err != nil:
				return err
			}
			promoted = req.Promoted
			if wait <= 0 {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "requested: the controller repoints %s of %s to %s\n", shard, ref, driver.BackendKey(promoted))
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), wait)
			defer cancel()
			for {
				res, err := c.requests(st).FailoverOutcome(ctx, ref, req)
				if err == nil {
					if err := c.emit(cmd.OutOrStdout(), res, func(w io.Writer) error {
						_, err := fmt.Fprintf(w, "failover of %s: %s at generation %d (old primary fenced: %v)%s\n", shard, res.Outcome, res.Generation, res.Fenced, strings.TrimRight(" "+res.Reason, " "))
						return err
					}); err != nil {
						return err
					}
					// A script that waits must see a failover that did not repoint as a failure.
					if res.Outcome != failover.Repointed.String() {
						return fmt.Errorf("failover of %s %s: %s", shard, res.Outcome, res.Reason)
					}
					return nil
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
