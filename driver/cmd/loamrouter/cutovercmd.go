package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"loam.dev/router/adapters"
	"loam.dev/router/controller"
)

func newCutoverCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cutover",
		Short: "Move a PgDog database to its resharded layout with the backend fence (§6.4)",
		Long: `A cutover moves a database in phase resharding to its target layout, on every router
instance: copy and catch up on the designated instance, pause every instance, fence the
shards of both layouts in Postgres (NOLOGIN, sessions ended), CUTOVER on the designated
instance, publish generation g+1, open the destination and reload every other instance,
resume; then finalize (stop the reverse stream, clear the fence on the source) or roll back
(the same steps the other way). Source and destination shards must be on different
servers: a role's fence holds for a whole server.

For a keyspace routed by Vitess ([databases.vitess]) the cutover is Vitess's Reshard of the
record's shards into the shards --to names: create the workflow, wait for the copy and the
lag, VDiff, switch the reads then the writes, check every target shard through vtgate,
then hold (the target serves, ReverseTraffic still possible) until finalize, which completes
(vitess.finalize_after completes on its own); the record mirrors the serving partition after
every step. rollback cancels it before the writes switched and reverses the traffic after,
the hold included.

plan checks every precondition and changes nothing; start asks the running controller
(loamrouter serve) to do it; status shows where it is; finalize and rollback decide.`,
	}
	planFlags := func(cc *cobra.Command) {
		cc.Flags().String("designated", "", "the instance that copies and runs CUTOVER (default databases.cutover.designated)")
		cc.Flags().String("publication", "", "publication COPY_DATA replicates (default databases.cutover.publication, else <db>_pub)")
		cc.Flags().String("role", "", "application role fenced on the shards of both layouts (default databases.app_user)")
		cc.Flags().Int64("lag-threshold", 0, "replication lag in bytes at which the copy counts as caught up (default 1000000)")
		cc.Flags().Duration("grace", 0, "wait between stopping the reverse stream and clearing the fence at finalize (default 60s)")
		cc.Flags().StringSlice("to", nil, "Vitess keyspaces: the target shards of the Reshard (e.g. --to -80,80-)")
		cc.Flags().String("workflow", "", "Vitess keyspaces: the Reshard workflow's name (default loam_g<generation>)")
	}
	plan := &cobra.Command{
		Use:   "plan <db>",
		Short: "Dry run: check every precondition of a cutover, including that a rollback would work; change nothing",
		Example: `  loamrouter cutover plan app
  loamrouter cutover plan app --designated pgdog-2 --output json
  loamrouter cutover plan customer --to -80,80-`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, st, err := c.plan(cmd, args[0])
			if err != nil {
				return err
			}
			st.Close()
			if err := c.emit(cmd.OutOrStdout(), rep, func(w io.Writer) error { printPlan(w, rep); return nil }); err != nil {
				return err
			}
			if !rep.OK {
				return errors.New("preconditions fail")
			}
			return nil
		},
	}
	planFlags(plan)
	start := &cobra.Command{
		Use:   "start <db>",
		Short: "Check the plan, then ask the controller to run the cutover",
		Example: `  loamrouter cutover start app
  loamrouter cutover status app --watch`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, st, err := c.plan(cmd, args[0])
			if err != nil {
				return err
			}
			defer st.Close()
			if !rep.OK {
				printPlan(cmd.ErrOrStderr(), rep)
				return errors.New("not started: preconditions fail (see above)")
			}
			ref := c.db(args[0])
			var req controller.CutoverRequest
			if rep.Vitess != nil {
				req, err = c.requests(st).StartVitessCutover(cmd.Context(), ref, *rep.Vitess)
			} else {
				req, err = c.requests(st).StartCutover(cmd.Context(), ref, rep.Plan)
			}
			if err != nil {
				if errors.Is(err, adapters.ErrConflict) {
					return fmt.Errorf("a cutover of %s is already requested; see `loamrouter cutover status %s`", ref, args[0])
				}
				return err
			}
			return c.emit(cmd.OutOrStdout(), req, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "requested: the controller runs the cutover of %s from generation %d; follow it with `loamrouter cutover status %s --watch`\n", ref, req.From, args[0])
				return err
			})
		},
	}
	planFlags(start)
	status := &cobra.Command{
		Use:   "status <db>",
		Short: "Show the cutover's step bar, the current step's elapsed time, an ETA from lag and copy rate, and once paused the pause window's timeline",
		Example: `  loamrouter cutover status app
  loamrouter cutover status app --watch
  loamrouter cutover status app --report cutover.html`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := c.openStore(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			ref := c.db(args[0])
			watch, _ := cmd.Flags().GetBool("watch")
			report, _ := cmd.Flags().GetString("report")
			for {
				p, entries, err := controller.CutoverStatus(cmd.Context(), st, ref)
				if err != nil {
					return err
				}
				if report != "" {
					if err := cutoverReport(report, fmt.Sprintf("cutover of %s", ref), p, entries); err != nil {
						return err
					}
				}
				if err := c.emit(cmd.OutOrStdout(), p, func(w io.Writer) error { printProgress(w, p); return nil }); err != nil {
					return err
				}
				if report != "" {
					fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", report)
				}
				if !watch || p.Outcome != "" {
					return nil
				}
				select {
				case <-cmd.Context().Done():
					return nil
				case <-time.After(time.Second):
				}
			}
		},
	}
	status.Flags().Bool("watch", false, "refresh every second until the cutover ends")
	status.Flags().String("report", "", "also write a self-contained HTML page with a picture of the cutover (the pause window's timeline, step by step and command by command; a lane per component, an arrow per command and reply)")
	decide := func(use, decision, short, example string) *cobra.Command {
		return &cobra.Command{
			Use: use, Short: short, Example: example, Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				st, err := c.openStore(cmd.Context())
				if err != nil {
					return err
				}
				defer st.Close()
				ref := c.db(args[0])
				if err := c.requests(st).DecideCutover(cmd.Context(), ref, decision); err != nil {
					return err
				}
				if dc, ok := c.cfg.Database(ref); ok && dc.Vitess != nil {
					_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s requested for %s; %s\n", decision, ref, map[string]string{
						controller.Finalize: "the Reshard completes once the writes are switched and the check through vtgate passed (no ReverseTraffic after that)",
						controller.Reverse:  "the Reshard cancels at its next step (before the writes switched) or reverses the traffic (after, the hold included)",
					}[decision])
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s requested for %s; the controller acts on it once every instance has resumed\n", decision, ref)
				return err
			},
		}
	}
	cmd.AddCommand(plan, start, status,
		decide("finalize <db>", "finalize", "Keep the new layout: stop the reverse stream, wait the grace period, clear the fence", "  loamrouter cutover finalize app"),
		decide("rollback <db>", "reverse", "Go back to the source layout (before the point of no return: roll back; after it: reverse)", "  loamrouter cutover rollback app"))
	return cmd
}

// plan builds the plan from flags and the config, opens the fleet and checks it.
func (c *cli) plan(cmd *cobra.Command, db string) (*controller.PlanReport, Store, error) {
	ref := c.db(db)
	dc, ok := c.cfg.Database(ref)
	if !ok {
		return nil, nil, fmt.Errorf("%s has no [[databases]] table in %s: a cutover needs its routers and logins", ref, c.cfg.Source())
	}
	if dc.Vitess != nil {
		to, _ := cmd.Flags().GetStringSlice("to")
		workflow, _ := cmd.Flags().GetString("workflow")
		st, err := c.openStore(cmd.Context())
		if err != nil {
			return nil, nil, err
		}
		rep, err := controller.PlanVitessCutover(cmd.Context(), st, c.cfg, ref, to, workflow, c.opener())
		if err != nil {
			st.Close()
			return nil, nil, err
		}
		return rep, st, nil
	}
	p := dc.CutoverPlan()
	if v, _ := cmd.Flags().GetString("designated"); v != "" {
		p.Designated = v
	}
	if v, _ := cmd.Flags().GetString("publication"); v != "" {
		p.Publication = v
	}
	if v, _ := cmd.Flags().GetString("role"); v != "" {
		p.Role = v
	}
	if v, _ := cmd.Flags().GetInt64("lag-threshold"); v > 0 {
		p.Options.LagThreshold = v
	}
	if v, _ := cmd.Flags().GetDuration("grace"); v > 0 {
		p.Options.Grace = v.Milliseconds()
	}
	st, err := c.openStore(cmd.Context())
	if err != nil {
		return nil, nil, err
	}
	rep, err := controller.PlanCutover(cmd.Context(), st, c.cfg, ref, p, c.opener())
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return rep, st, nil
}

// requests are the operator's requests on st, signed by who runs the command.
func (c *cli) requests(st Store) controller.Requests {
	return controller.Requests{Store: st, By: c.who(), Log: c.log}
}

// who names the operator running a command.
func (c *cli) who() string {
	who := "cli"
	if u := os.Getenv("USER"); u != "" {
		who += ":" + u
	}
	if h, err := os.Hostname(); err == nil {
		who += "@" + h
	}
	return who
}
