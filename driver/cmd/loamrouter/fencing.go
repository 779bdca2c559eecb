package main

import (
	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	valkeygo "github.com/valkey-io/valkey-go"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/valkey"
	"loam.dev/router/controller"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/fencing"
	"loam.dev/router/machine"
	"loam.dev/router/machine/fencemigrate"
)

// The fencing commands drive the fencing-key migration (O → A → B → backfill → C → enable)
// of one fenced session directory on Valkey/Redis: each command is one operator request to
// the fencemigrate machine, whose state is kept in the store between commands.

func fencingSnapshotKey(name string) string { return driver.SnapshotKey("fencemigrate", name) }
func fencingAllowedKey(name string) string  { return "fencing/" + name + "/allowed" }
func fencingEnabledKey(name string) string  { return "fencing/" + name + "/cluster-enabled" }

// fencingRun is one command's session with the machine.
type fencingRun struct {
	c       *cli
	name    string
	st      Store
	ex      *valkey.Executor
	m       *fencemigrate.Machine
	version uint64 // of the snapshot blob
	mctx    *machine.Ctx
	out     io.Writer
	audit   *driver.Audit
	refused error
	timers  map[string]int64
	// roster is the deployment's pod names (nil: none given), from where; fleet is what the
	// command fed the machine about them.
	roster []string
	from   string
	fleet  rosterFeed
}

func (c *cli) fencingConfig(name string) (*controller.FencingConfig, error) {
	for i := range c.cfg.Fencing {
		if c.cfg.Fencing[i].Name == name {
			return &c.cfg.Fencing[i], nil
		}
	}
	var names []string
	for _, f := range c.cfg.Fencing {
		names = append(names, f.Name)
	}
	return nil, fmt.Errorf("no [[fencing]] table named %q in %s (configured: %s)", name, c.cfg.Source(), strings.Join(names, ", "))
}

func naming(f *controller.FencingConfig) fencing.Naming {
	n := fencing.Buzz
	for _, p := range []struct {
		dst *string
		v   string
	}{{&n.OldLease, f.OldLease}, {&n.OldGeneration, f.OldGeneration}, {&n.NewLease, f.NewLease}, {&n.NewGeneration, f.NewGeneration}} {
		if p.v != "" {
			*p.dst = p.v
		}
	}
	return n
}

// openFencing restores the machine, connects to Valkey and feeds the fleet: every pod of
// the roster (--pods, else the table's pods) at its reported version or O, every pod that
// reports, and PodGone for a pod the machine knew that is in neither (see mergeRoster).
// command names the subcommand; every one but status refuses without a roster.
func (c *cli) openFencing(cmd *cobra.Command, command, name string) (*fencingRun, func(), error) {
	ctx, out := cmd.Context(), cmd.OutOrStdout()
	fc, err := c.fencingConfig(name)
	if err != nil {
		return nil, nil, err
	}
	roster, from, err := fencingRoster(cmd, fc)
	if err != nil {
		return nil, nil, err
	}
	if command != "status" {
		if err := needRoster(name, command, roster); err != nil {
			return nil, nil, err
		}
	}
	n := naming(fc)
	if err := n.Validate(); err != nil {
		return nil, nil, fmt.Errorf("fencing %q: %w", name, err)
	}
	vc, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: fc.Addrs, DisableCache: true})
	if err != nil {
		return nil, nil, fmt.Errorf("fencing %q: connecting to %v: %w", name, fc.Addrs, err)
	}
	ex, err := valkey.NewExecutor(vc, n)
	if err != nil {
		vc.Close()
		return nil, nil, err
	}
	st, err := c.openStore(ctx)
	if err != nil {
		vc.Close()
		return nil, nil, err
	}
	closeAll := func() { st.Close(); vc.Close() }
	var seed [32]byte
	_, _ = crand.Read(seed[:])
	trace, err := driver.TraceFromEnv(c.log)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	var sink machine.TraceSink = machine.Discard
	if trace != nil {
		sink = trace
		prev := closeAll
		closeAll = func() { prev(); trace.Close() }
	}
	r := &fencingRun{c: c, name: name, st: st, ex: ex, out: out, audit: c.audit(st), timers: map[string]int64{},
		roster: roster, from: from,
		mctx: &machine.Ctx{Rand: rand.New(rand.NewChaCha8(seed)), Trace: sink}}
	b, err := st.GetBlob(ctx, fencingSnapshotKey(name))
	switch {
	case errors.Is(err, adapters.ErrNotFound):
		r.m = fencemigrate.New(fencemigrate.Config{LeaseTTL: fc.LeaseTTL.Or(30 * time.Second).Milliseconds()})
	case err != nil:
		closeAll()
		return nil, nil, err
	default:
		var s fencemigrate.Snapshot
		if err := json.Unmarshal(b.Data, &s); err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("%s: %w: %v", b.Key, adapters.ErrCorrupt, err)
		}
		m, err := fencemigrate.Restore(s)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("%s: %w: %w", b.Key, adapters.ErrCorrupt, err)
		}
		r.m, r.version = m, b.Version
	}
	vs, err := ex.Versions(ctx)
	if err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("fencing %q: reading the pods' versions: %w", name, err)
	}
	r.fleet = mergeRoster(roster, vs, r.m.Snapshot().Pods)
	if err := r.feed(ctx, r.fleet.Inputs...); err != nil {
		closeAll()
		return nil, nil, err
	}
	if err := r.resume(ctx); err != nil {
		closeAll()
		return nil, nil, err
	}
	return r, closeAll, nil
}

// resume carries on what an earlier command left in flight (the machine has no restart
// input): a backfill, a scan or an enable is sent again (each is idempotent); a drain wait
// whose timer died with the earlier command is waited again, in full, from now.
func (r *fencingRun) resume(ctx context.Context) error {
	s := r.m.Snapshot()
	var cmds []fencemigrate.Command
	if s.BackfillStep != "" {
		cmds = append(cmds, fencemigrate.RunBackfill{Step: s.BackfillStep})
	}
	if s.ScanStep != "" {
		cmds = append(cmds, fencemigrate.ScanOldLeases{Step: s.ScanStep})
	}
	if s.EnableStep != "" {
		cmds = append(cmds, fencemigrate.EnableCluster{Step: s.EnableStep})
	}
	if s.DrainTimer != "" {
		at := time.Now().Add(time.Duration(s.Config.LeaseTTL) * time.Millisecond).UnixMilli()
		cmds = append(cmds, fencemigrate.SetTimer{SetTimer: machine.SetTimer{ID: s.DrainTimer, At: at}})
	}
	return r.execute(ctx, cmds)
}

// feed gives inputs to the machine, saves its snapshot, then executes what it asked for,
// feeding replies back, until nothing is left but a refusal or a confirmation to ask for.
func (r *fencingRun) feed(ctx context.Context, inputs ...fencemigrate.Input) error {
	var cmds []fencemigrate.Command
	for _, in := range inputs {
		r.mctx.Now = time.Now().UnixMilli()
		cmds = append(cmds, r.m.On(r.mctx, in)...)
	}
	if err := r.save(ctx); err != nil {
		return err
	}
	return r.execute(ctx, cmds)
}

func (r *fencingRun) save(ctx context.Context) error {
	data, err := json.Marshal(r.m.Snapshot())
	if err != nil {
		return err
	}
	v, err := r.st.PutBlob(ctx, fencingSnapshotKey(r.name), r.version, data)
	if err != nil {
		return fmt.Errorf("saving the migration's state (another fencing command running?): %w", err)
	}
	r.version = v
	return nil
}

func (r *fencingRun) record(ctx context.Context, what, result string) {
	_ = r.audit.Append(ctx, driver.AuditEntry{Event: driver.AuditAction, Machine: "fencemigrate", ID: r.name, What: what, Result: result})
}

func (r *fencingRun) execute(ctx context.Context, cmds []fencemigrate.Command) error {
	for _, c := range cmds {
		var reply fencemigrate.Input
		switch c := c.(type) {
		case fencemigrate.AllowVersion:
			data, _ := json.Marshal(map[string]any{"version": c.Version.String(), "step": c.Step, "at": time.Now().UnixMilli()})
			err := putOver(ctx, r.st, fencingAllowedKey(r.name), data)
			r.record(ctx, "allow "+c.Version.String(), resultString(err))
			if err != nil {
				return err
			}
			fmt.Fprintf(r.out, "allowed: pods of %s may now run %s; roll them (the deploy system reads %s) and they report it\n", r.name, c.Version, fencingAllowedKey(r.name))
		case fencemigrate.RunBackfill:
			fmt.Fprintf(r.out, "backfill %s: folding every old counter into the new one...\n", c.Step)
			res, err := r.ex.Backfill(ctx)
			r.record(ctx, fmt.Sprintf("backfill %s: %d counters, %d raised", c.Step, res.Counters, res.Raised), resultString(err))
			reply = fencemigrate.BackfillDone{Step: c.Step, Sessions: res.Raised, Err: err}
			if err == nil {
				fmt.Fprintf(r.out, "backfill %s: %d old counters, %d new counters raised\n", c.Step, res.Counters, res.Raised)
			}
		case fencemigrate.SetTimer:
			r.timers[c.ID] = c.At
			if err := r.wait(ctx, c.ID, c.At); err != nil {
				return err
			}
			reply = fencemigrate.TimerFired{TimerFired: machine.TimerFired{ID: c.ID}}
		case fencemigrate.ScanOldLeases:
			live, err := r.ex.LiveOldLeases(ctx)
			r.record(ctx, fmt.Sprintf("scan %s: %d live old-key leases", c.Step, len(live)), resultString(err))
			reply = fencemigrate.OldLeasesScanned{Step: c.Step, Live: len(live), Err: err}
			if err == nil {
				fmt.Fprintf(r.out, "scan %s: %d live old-key leases on every primary\n", c.Step, len(live))
			}
		case fencemigrate.AskConfirmation:
			fmt.Fprintf(r.out, "cluster mode cannot be turned off again. %s\nto go through, run: loamrouter fencing enable %s --confirm %s\n", c.Reason, r.name, c.Token)
		case fencemigrate.EnableCluster:
			data, _ := json.Marshal(map[string]any{"step": c.Step, "at": time.Now().UnixMilli(), "by": r.c.who()})
			err := putOver(ctx, r.st, fencingEnabledKey(r.name), data)
			r.record(ctx, "enable cluster mode "+c.Step, resultString(err))
			reply = fencemigrate.ClusterEnabled{Step: c.Step, Err: err}
			if err == nil {
				fmt.Fprintf(r.out, "cluster mode enabled for %s (%s): the door is open for good\n", r.name, fencingEnabledKey(r.name))
			}
		case fencemigrate.Refused:
			r.record(ctx, "refused "+c.Request, string(c.Gate)+": "+c.Detail)
			r.refused = c.Err()
		case fencemigrate.Alarm:
			fmt.Fprintf(r.out, "ALARM: %s\n", c.Detail)
			r.record(ctx, "alarm", c.Detail)
		}
		if reply != nil {
			if err := r.feed(ctx, reply); err != nil {
				return err
			}
		}
	}
	return nil
}

// wait sleeps until at, with a progress line: the drain wait is a whole lease TTL.
func (r *fencingRun) wait(ctx context.Context, id string, at int64) error {
	total := time.Until(time.UnixMilli(at))
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		left := time.Until(time.UnixMilli(at))
		if left <= 0 {
			fmt.Fprintln(r.out)
			return nil
		}
		done := 1 - float64(left)/float64(max(total, time.Millisecond))
		fmt.Fprintf(r.out, "\rdrain wait %s: [%-20s] %3.0f%%, %s left (old-key leases expire within one lease TTL)", id,
			strings.Repeat("█", int(done*20)), done*100, left.Round(time.Second))
		select {
		case <-ctx.Done():
			fmt.Fprintln(r.out)
			return fmt.Errorf("interrupted during the drain wait; run the command again to wait it out: %w", ctx.Err())
		case <-t.C:
		case <-time.After(left):
		}
	}
}

func putOver(ctx context.Context, st adapters.BlobStore, key string, data []byte) error {
	var expect uint64
	if b, err := st.GetBlob(ctx, key); err == nil {
		expect = b.Version
	}
	_, err := st.PutBlob(ctx, key, expect, data)
	return err
}

func resultString(err error) string {
	if err != nil {
		return err.Error()
	}
	return "ok"
}

// fencingStatus is what `fencing status` shows.
type fencingStatus struct {
	Name       string            `json:"name"`
	Allowed    string            `json:"allowed"`
	Pods       map[string]string `json:"pods"`
	Backfilled bool              `json:"backfilled"`
	Drained    bool              `json:"drained"`
	Enabled    bool              `json:"enabled"`
	// Roster is the deployment's pod names (null: none given; advance and enable refuse),
	// RosterFrom where they came from.
	Roster     []string `json:"roster"`
	RosterFrom string   `json:"roster_from,omitempty"`
	// Unreported are roster pods with no report, counted as O; NotInRoster are reporting
	// pods the roster does not list, counted all the same.
	Unreported  []string `json:"unreported,omitempty"`
	NotInRoster []string `json:"not_in_roster,omitempty"`
	Warnings    []string `json:"warnings,omitempty"`
	Next        string   `json:"next"`
}

func (r *fencingRun) status() fencingStatus {
	s := r.m.Snapshot()
	st := fencingStatus{Name: r.name, Allowed: s.Allowed.String(), Pods: map[string]string{}, Backfilled: s.Backfilled, Drained: s.Drained, Enabled: s.Enabled,
		Roster: r.roster, RosterFrom: r.from, Unreported: r.fleet.Unreported, NotInRoster: r.fleet.NotInRoster}
	for p, v := range s.Pods {
		st.Pods[p] = v.String()
	}
	if r.roster == nil {
		st.Warnings = append(st.Warnings, fmt.Sprintf("the roster is missing: only the pods that report are known, and legacy O pods never report; advance and enable refuse until you %s", rosterFix))
	}
	for _, p := range r.fleet.NotInRoster {
		st.Warnings = append(st.Warnings, fmt.Sprintf("pod %s reports %s but is not in the roster (%s): it is counted, since it runs; add it to the roster if it belongs to the deployment, or if it is gone delete its report (HDEL %s %s)",
			p, st.Pods[p], r.from, valkey.DefaultPodsKey, p))
	}
	all := func(v fencing.Version) bool {
		if len(s.Pods) == 0 {
			return false
		}
		for _, pv := range s.Pods {
			if pv != v {
				return false
			}
		}
		return true
	}
	switch {
	case s.Enabled:
		st.Next = "nothing: the migration is over"
	case r.roster == nil:
		st.Next = fmt.Sprintf("give the fleet's roster (%s), then `fencing status %s` again", rosterFix, r.name)
	case s.Allowed < fencing.C && !all(s.Allowed) && !(s.Allowed == fencing.O && len(s.Pods) == 0):
		st.Next = fmt.Sprintf("roll every pod to %s (they report it), then `fencing advance %s`", s.Allowed, r.name)
	case s.Allowed == fencing.B && !s.Backfilled:
		st.Next = fmt.Sprintf("`fencing advance %s --backfill`", r.name)
	case s.Allowed < fencing.C:
		st.Next = fmt.Sprintf("`fencing advance %s` (allows %s)", r.name, s.Allowed+1)
	case !all(fencing.C):
		st.Next = "roll every pod to C (they report it)"
	default:
		st.Next = fmt.Sprintf("`fencing enable %s` (asks for confirmation: cluster mode cannot be turned off)", r.name)
	}
	return st
}

func newFencingCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fencing",
		Short: "Drive the fenced session directory's key migration (O → A → B → backfill → C → enable)",
		Long: `The fencing commands move one fenced session directory on Valkey/Redis ([[fencing]] in
loam.toml) through its key migration, one gate at a time: every request is refused, naming
the gate, unless the fleet's script versions, the backfill and the drain allow it.
Pods report their version into Valkey; the migration's state lives in the store.

The fleet's roster comes from the deploy system, not from the reports: pods = [...] in the
[[fencing]] table, or --pods a,b,c (overriding it, for scripts that read the deployment).
Legacy pods on O never report, so a roster pod that has not reported counts as O; a pod
that reports but is not in the roster counts too, with a warning in status; a pod is
forgotten only when it is in neither. advance and enable refuse without a roster; status
shows what it can and says the roster is missing.`,
		Example: `  loamrouter fencing status sessions
  loamrouter fencing advance sessions --pods "$(kubectl get pods -l app=relay -o jsonpath='{.items[*].metadata.name}' | tr ' ' ,)"`,
	}
	cmd.PersistentFlags().StringSlice("pods", nil, "the deployment's pod names, comma-separated (overrides fencing.pods in loam.toml)")
	run := func(cmd *cobra.Command, command, name string, inputs ...fencemigrate.Input) (*fencingRun, error) {
		r, closeAll, err := c.openFencing(cmd, command, name)
		if err != nil {
			return nil, err
		}
		defer closeAll()
		if err := r.feed(cmd.Context(), inputs...); err != nil {
			return nil, err
		}
		return r, r.refused
	}
	status := &cobra.Command{
		Use:     "status <name>",
		Short:   "Show the allowed version, every pod's version, the backfill, the drain, and what comes next",
		Example: "  loamrouter fencing status sessions\n  loamrouter fencing status sessions --output json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := run(cmd, "status", args[0])
			if err != nil {
				return err
			}
			s := r.status()
			return c.emit(cmd.OutOrStdout(), s, func(w io.Writer) error {
				fmt.Fprintf(w, "%s: allowed %s, backfilled %v, drained %v, cluster mode %v\n", s.Name, s.Allowed, s.Backfilled, s.Drained, s.Enabled)
				if s.Roster == nil {
					fmt.Fprintf(w, "roster: missing (%s)\n", rosterFix)
				} else {
					fmt.Fprintf(w, "roster: %d pods (%s)\n", len(s.Roster), s.RosterFrom)
				}
				for _, p := range slices.Sorted(maps.Keys(s.Pods)) {
					note := ""
					switch {
					case slices.Contains(s.Unreported, p):
						note = "  (no report: counted as O, it may run the legacy scripts)"
					case slices.Contains(s.NotInRoster, p):
						note = "  (not in the roster)"
					}
					fmt.Fprintf(w, "  pod %-20s %s%s\n", p, s.Pods[p], note)
				}
				for _, m := range s.Warnings {
					fmt.Fprintf(w, "warning: %s\n", m)
				}
				fmt.Fprintf(w, "next: %s\n", s.Next)
				return nil
			})
		},
	}
	advance := &cobra.Command{
		Use:   "advance <name> [--to A|B|C] [--backfill]",
		Short: "Allow the next script version (or run the backfill); refused, naming the gate, when it does not hold",
		Long: `advance allows the next version fleet-wide: A always, B once every pod runs A, C once every
pod runs B, the backfill has run and, one lease TTL later, a complete scan found no live
old-key lease (advance waits the drain out, with a progress line). --backfill folds the
old counters into the new ones, once every pod runs B. "Every pod" is every pod of the
roster (fencing.pods or --pods; advance refuses without one) and every pod that reports:
a roster pod that has not reported counts as O.`,
		Example: "  loamrouter fencing advance sessions\n  loamrouter fencing advance sessions --backfill\n  loamrouter fencing advance sessions --to C\n  loamrouter fencing advance sessions --pods relay-0,relay-1,relay-2",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			backfill, _ := cmd.Flags().GetBool("backfill")
			to, _ := cmd.Flags().GetString("to")
			r, closeAll, err := c.openFencing(cmd, "advance", args[0])
			if err != nil {
				return err
			}
			defer closeAll()
			var in fencemigrate.Input
			switch {
			case backfill:
				in = fencemigrate.StartBackfill{}
			case to != "":
				v, err := fencing.ParseVersion(strings.ToUpper(to))
				if err != nil {
					return fmt.Errorf("--to %q: %w", to, err)
				}
				in = fencemigrate.Advance{To: v}
			default:
				in = fencemigrate.Advance{To: r.m.Allowed() + 1}
			}
			if err := r.feed(cmd.Context(), in); err != nil {
				return err
			}
			// A request for C that found the drain unproven has waited it out (the drain
			// timer was armed by the same step): ask again now that it is proven.
			if a, ok := in.(fencemigrate.Advance); ok && r.refused != nil && a.To == fencing.C && r.m.Allowed() != fencing.C && r.m.Snapshot().Drained {
				r.refused = nil
				if err := r.feed(cmd.Context(), in); err != nil {
					return err
				}
			}
			return r.refused
		},
	}
	advance.Flags().String("to", "", "the version to allow (default: the next one)")
	advance.Flags().Bool("backfill", false, "run the backfill instead")
	enable := &cobra.Command{
		Use:     "enable <name> [--confirm <token>]",
		Short:   "Enable cluster mode, the one-way door: asks for a confirmation token first",
		Example: "  loamrouter fencing enable sessions\n  loamrouter fencing enable sessions --confirm 8f3a...",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			token, _ := cmd.Flags().GetString("confirm")
			var in fencemigrate.Input = fencemigrate.RequestEnable{}
			if token != "" {
				in = fencemigrate.Confirm{Token: token}
			}
			_, err := run(cmd, "enable", args[0], in)
			return err
		},
	}
	enable.Flags().String("confirm", "", "the token the first `fencing enable` printed")
	cmd.AddCommand(status, advance, enable)
	return cmd
}
