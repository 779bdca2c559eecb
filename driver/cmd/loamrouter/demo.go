package main

import (
	"bytes"
	"cmp"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/boltstore"
	"loam.dev/router/adapters/httpstore"
	"loam.dev/router/controller"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/pghash"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/pglaunch"
	"loam.dev/router/refrouter"
	"loam.dev/router/vitesslaunch"
)

func newDemoCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "The main job end to end on this machine: move a shard set under write load with the fenced cutover",
		Long: `demo starts two throwaway Postgres servers on 127.0.0.1 in a temporary directory (as the
postgres user when run as root; installing Debian's postgresql first when it is missing and
this runs as root), stores a shard map for database app (2 shards) in the embedded store,
starts the controller and three reference-router instances (refrouter, standing
in for PgDog), and runs eight writers through them. It then reshards app from 2 to 3 shards
with the fenced cutover while printing its progress; one router instance is unreachable from
the controller throughout, so the fence has a stale router to refuse. It ends with a report:
the generation timeline, the pause window, writes acknowledged / refused by the fence / lost,
and the pgdog.toml of the new generation. Everything it started is stopped and removed,
also on Ctrl-C.

With --vitess it shows the Vitess half: a throwaway Vitess (etcd, vtctld, one primary
vttablet per shard on MariaDB, vtgate; the programs from $LOAM_VITESS_BIN, which
conformance/vitesstest/vitessbin/build.sh builds), keyspace demo of one shard resharded into
-80 and 80- by the controller (cutover plan and start: Vitess's Reshard, the record mirroring
every step) while writers insert through vtgate; its report gives the copy time, the write
pause around SwitchTraffic, and every acknowledged row found on the shard the record names.`,
		Example: `  make demo
  loamrouter demo
  LOAM_VITESS_BIN=<dir build.sh printed> loamrouter demo --vitess
  loamrouter demo --report cutover.html --keep`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := demoOptions{}
			opts.report, _ = cmd.Flags().GetString("report")
			opts.keep, _ = cmd.Flags().GetBool("keep")
			opts.noInstall, _ = cmd.Flags().GetBool("no-install")
			opts.workers, _ = cmd.Flags().GetInt("workers")
			opts.steady, _ = cmd.Flags().GetDuration("steady")
			if v, _ := cmd.Flags().GetBool("vitess"); v {
				r, err := runVitessDemo(cmd.Context(), cmd.OutOrStdout(), opts)
				if err != nil {
					return err
				}
				if r.Lost > 0 || r.Misplaced > 0 {
					return fmt.Errorf("%d acknowledged writes were lost, %d are on another shard than the record says", r.Lost, r.Misplaced)
				}
				return nil
			}
			r, err := runDemo(cmd.Context(), cmd.OutOrStdout(), opts)
			pglaunch.RemoveTemplate() // the servers' initdb template, made once per process
			if err != nil {
				return err
			}
			if r.Lost > 0 {
				return fmt.Errorf("%d acknowledged writes were lost", r.Lost)
			}
			return nil
		},
	}
	cmd.Flags().String("report", "", "also write the cutover's picture (HTML with an SVG) to this file")
	cmd.Flags().Bool("keep", false, "keep the temporary directory (servers' logs, the store, the controller's log)")
	cmd.Flags().Bool("no-install", false, "never install PostgreSQL; fail when it is missing")
	cmd.Flags().Int("workers", 8, "client goroutines writing through the routers")
	cmd.Flags().Duration("steady", 2*time.Second, "how long the load runs before and after the cutover")
	cmd.Flags().Bool("vitess", false, "the Vitess half instead: a throwaway Vitess (etcd, vtctld, vttablets on MariaDB, vtgate; the programs from $"+vitesslaunch.EnvBinDir+"), keyspace demo resharded 0 -> -80,80- by the controller under writes through vtgate")
	return cmd
}

type demoOptions struct {
	report    string
	keep      bool
	noInstall bool
	workers   int
	steady    time.Duration
	// store, when set, is the [store] body of loam.toml instead of the embedded store (the
	// etcd fault test), and leaseTTL the controller's lease_ttl (default 2s).
	store    string
	leaseTTL time.Duration
	// onPhase, when set, is called as the cutover reaches each step (a test's fault).
	onPhase func(step string)
}

// demoReport is what the demo measured.
type demoReport struct {
	Wall        time.Duration
	Cutover     time.Duration
	PauseWindow time.Duration
	Outcome     string
	Acked       int
	Fenced      int
	Failed      int // failed otherwise (not cut short by the end of the load)
	CutShort    int // still in flight when the load stopped
	Lost        int
	Timeline    []string
	PgDogToml   string
	// Pause is where the pause window went, from the audit log (driver.PauseFromAudit).
	Pause *driver.PauseReport
}

const (
	demoDB      = "app"
	demoRole    = "app"
	demoSrcN    = 2
	demoDstN    = 3
	demoStale   = "ref-3" // unreachable from the controller during the cutover
	demoDesig   = "ref-1"
	demoPasswd  = "app-demo-pw"
	demoTable   = "t"
	demoTimeout = 5 * time.Minute
)

// demoWorld is what the demo started, for the controller's opener and for cleanup.
type demoWorld struct {
	src, dst *pglaunch.Server
	fleet    *refrouter.Fleet
	mu       sync.Mutex
	rs       *refrouter.Resharder
}

// resharder is the designated instance's resharding commands: the reference router's
// stand-in for COPY_DATA and CUTOVER, made once the reshard is published.
type lazyResharder struct{ w *demoWorld }

func (l lazyResharder) get() (*refrouter.Resharder, error) {
	l.w.mu.Lock()
	defer l.w.mu.Unlock()
	if l.w.rs == nil {
		return nil, errors.New("no reshard is prepared on " + demoDesig)
	}
	return l.w.rs, nil
}
func (l lazyResharder) CopyData(ctx context.Context, source, destination, publication, slot string) (int64, error) {
	rs, err := l.get()
	if err != nil {
		return 0, err
	}
	return rs.CopyData(ctx, source, destination, publication, slot)
}
func (l lazyResharder) Tasks(ctx context.Context) ([]adapters.Task, error) {
	rs, err := l.get()
	if err != nil {
		return nil, nil // nothing prepared, nothing running
	}
	return rs.Tasks(ctx)
}
func (l lazyResharder) SlotLag(ctx context.Context, slot string, shards int) (int64, bool, error) {
	rs, err := l.get()
	if err != nil {
		return 0, false, err
	}
	return rs.SlotLag(ctx, slot, shards)
}
func (l lazyResharder) Cutover(ctx context.Context, task int64) error {
	rs, err := l.get()
	if err != nil {
		return err
	}
	return rs.Cutover(ctx, task)
}
func (l lazyResharder) StopTask(ctx context.Context, task int64) error {
	rs, err := l.get()
	if err != nil {
		return err
	}
	return rs.StopTask(ctx, task)
}

// opener gives the controller the reference routers and Postgres shards.
func (w *demoWorld) opener(ctx context.Context, dc *controller.DatabaseConfig) (*controller.Fleet, error) {
	f := controller.NewFleet()
	for _, id := range w.fleet.IDs() {
		f.Routers[id] = w.fleet.Router(id)
	}
	f.Resharders[demoDesig] = lazyResharder{w}
	f.Dial = func(ctx context.Context, b shardmap.Backend) (adapters.ShardBackend, error) {
		return controller.DialShard(ctx, dc, b)
	}
	return f, nil
}

func (w *demoWorld) superDSN(b shardmap.Backend) string {
	s := w.src
	if int(b.Port) == w.dst.Port {
		s = w.dst
	}
	return s.DSN(b.Database)
}

// runDemo is the demo; out receives the narration.
func runDemo(ctx context.Context, out io.Writer, o demoOptions) (*demoReport, error) {
	t0 := time.Now()
	if o.workers <= 0 {
		o.workers = 8
	}
	if o.steady <= 0 {
		o.steady = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, demoTimeout)
	defer cancel()
	say := func(format string, a ...any) { fmt.Fprintf(out, "==> "+format+"\n", a...) }
	cleanups := []func(){}
	defer func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}()

	var bin string
	var err error
	if o.noInstall {
		bin, err = pglaunch.BinDir()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errNoPostgres, err)
		}
	} else if bin, err = ensurePostgres(ctx, out); err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "loam-demo-")
	if err != nil {
		return nil, err
	}
	if o.keep {
		defer fmt.Fprintf(out, "kept %s (the store, controller.log) and the servers' directories above\n", root)
	} else {
		cleanups = append(cleanups, func() { os.RemoveAll(root) })
	}
	// The servers are pglaunch's throwaway ones (fsync off, trust on 127.0.0.1, as
	// the postgres user when run as root), with what logical replication needs.
	say("starting two Postgres servers (%s)", bin)
	settings := pglaunch.WithSettings(map[string]string{"wal_level": "logical", "max_connections": "200", "max_replication_slots": "32",
		"max_wal_senders": "32", "max_logical_replication_workers": "24", "max_worker_processes": "40"})
	w := &demoWorld{}
	var srcErr, dstErr error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); w.src, srcErr = pglaunch.Start(ctx, settings) }()
	go func() { defer wg.Done(); w.dst, dstErr = pglaunch.Start(ctx, settings) }()
	wg.Wait()
	for _, s := range []*pglaunch.Server{w.src, w.dst} {
		if s == nil {
			continue
		}
		if o.keep {
			cleanups = append(cleanups, func() { _ = s.Stop() })
		} else {
			cleanups = append(cleanups, func() { _ = s.Close() })
		}
	}
	if err := errors.Join(srcErr, dstErr); err != nil {
		return nil, err
	}
	rec, target, err := w.createShards(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "    source: 2 shards on 127.0.0.1:%d (%s)\n    destination: 3 shards on 127.0.0.1:%d (%s)\n",
		w.src.Port, w.src.DataDir, w.dst.Port, w.dst.DataDir)

	// The controller's configuration, and the record at generation 1.
	ref := adapters.DBRef{Namespace: "default", Database: demoDB}
	setup, err := setUpDemo(ctx, root, func(listen string) string { return demoConfig(root, listen, o) },
		map[string]string{"LOAM_DEMO_APP_PW": demoPasswd, "LOAM_DEMO_ADMIN_PW": "admin-demo-pw", "LOAM_DEMO_COPY_PW": "copy-demo-pw"}, ref, rec)
	if err != nil {
		return nil, err
	}
	cfg, confPath, listen := setup.cfg, setup.confPath, setup.listen
	dc := &cfg.Databases[0]
	files1, err := controller.RenderFiles(rec, dc)
	if err != nil {
		return nil, err
	}
	where := "embedded store " + cfg.Store.Dir
	if cfg.Store.Kind == "etcd" {
		where = "etcd " + strings.Join(cfg.Store.Etcd.Endpoints, ",")
	}
	say("shard map: %s generation 1, pg_hash on id over 2 shards (%s)", ref, where)

	// Three reference routers, and the controller.
	w.fleet, err = refrouter.OpenFleet(refrouter.FleetOptions{Root: filepath.Join(root, "routers"), N: 3, Database: demoDB, User: demoRole, MaxConns: 4, Files: files1, Generation: rec.Generation})
	if err != nil {
		return nil, err
	}
	cleanups = append(cleanups, w.fleet.Close)
	c := &cli{open: w.opener}
	logPath, stop, remote, err := setup.start(ctx, c)
	if err != nil {
		return nil, err
	}
	cleanups = append(cleanups, stop)
	defer remote.Close()
	say("controller running (lease, ConfigPush, in-doubt monitor, cutovers); metrics on http://%s/metrics, its log in %s", listen, logPath)
	runCLI := func(print bool, args ...string) (string, error) {
		return demoCLI(ctx, c, confPath, out, print, args...)
	}
	if err := waitPushed(ctx, remote, ref, 1, 3); err != nil {
		return nil, err
	}

	// The load.
	load := w.fleet.StartLoad(ctx, refrouter.LoadOptions{Workers: o.workers, Table: demoTable})
	cleanups = append(cleanups, func() { load.Stop() })
	say("%d writers running through ref-1..ref-3; steady state for %v", o.workers, o.steady)
	if !sleepCtx(ctx, o.steady) {
		return nil, ctx.Err()
	}
	acked, _, _ := refrouter.Tally(load.Writes())
	fmt.Fprintf(out, "    %d writes acknowledged so far\n", acked)

	// Generation 2: resharding towards 3 shards.
	rec2 := rec.Clone()
	rec2.Generation, rec2.Target = 2, &target
	rec2.State = shardmap.State{Phase: shardmap.Resharding, To: 3}
	data, _ := json.Marshal(rec2)
	recPath := filepath.Join(root, "app-g2.json")
	if err := os.WriteFile(recPath, data, 0o600); err != nil {
		return nil, err
	}
	say("publishing generation 2: resharding to 3 shards (the destination is rendered everywhere, unused by clients)")
	if _, err := runCLI(true, "map", "apply", demoDB, "--file", recPath); err != nil {
		return nil, err
	}
	stored, err := remote.Read(ctx, ref)
	if err != nil {
		return nil, err
	}
	rs, err := refrouter.NewResharder(w.fleet.Router(demoDesig), stored, w.superDSN)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.rs = rs
	w.mu.Unlock()
	cleanups = append(cleanups, func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = rs.Close(cctx)
	})
	if err := waitPushed(ctx, remote, ref, 2, 3); err != nil {
		return nil, err
	}

	// The cutover.
	if _, err := runCLI(true, "cutover", "plan", demoDB); err != nil {
		return nil, fmt.Errorf("the plan does not hold: %w", err)
	}
	w.fleet.Router(demoStale).SetUnreachable(true)
	say("%s is now unreachable from the controller (its clients still write through it): the fence must refuse it", demoStale)
	cutStart := time.Now()
	if _, err := runCLI(true, "cutover", "start", demoDB); err != nil {
		return nil, err
	}
	var finalizeAsked bool
	last := ""
	for {
		p, _, err := controller.CutoverStatus(ctx, remote, ref)
		if err != nil {
			return nil, err
		}
		line := fmt.Sprintf("    %s %-8s", progressBar(p), p.Current)
		if p.Current == "copy" && p.LagBytes >= 0 {
			line += fmt.Sprintf(" lag %s", bytesText(p.LagBytes))
			if p.ETAMS > 0 {
				line += fmt.Sprintf(", ETA %s", dur(p.ETAMS))
			}
		}
		if p.Current != last || p.Outcome != "" {
			fmt.Fprintf(out, "%s  (+%s)\n", line, time.Since(cutStart).Round(time.Millisecond))
			last = p.Current
			if o.onPhase != nil {
				o.onPhase(p.Current)
			}
		}
		if p.Outcome != "" {
			break
		}
		if p.Current == "resume" && !finalizeAsked && p.Steps[5].Commands >= 2 {
			finalizeAsked = true
			if !sleepCtx(ctx, 300*time.Millisecond) {
				return nil, ctx.Err()
			}
			if _, err := runCLI(true, "cutover", "finalize", demoDB); err != nil {
				return nil, err
			}
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return nil, ctx.Err()
		}
	}
	cutDur := time.Since(cutStart)
	w.fleet.Router(demoStale).SetUnreachable(false)
	if _, err := runCLI(true, "cutover", "status", demoDB); err != nil {
		return nil, err
	}
	final, err := remote.Read(ctx, ref)
	if err != nil {
		return nil, err
	}
	say("%s reachable again: ConfigPush moves it to generation %d", demoStale, final.Generation)
	if err := waitPushed(ctx, remote, ref, final.Generation, 3); err != nil {
		return nil, err
	}
	if !sleepCtx(ctx, o.steady/2) {
		return nil, ctx.Err()
	}
	writes := load.Stop()

	// What happened to every write.
	r := &demoReport{Cutover: cutDur}
	r.Acked, r.Fenced, r.Failed = refrouter.Tally(writes)
	for _, wr := range writes {
		if !wr.Acked() && !wr.Fenced() && errors.Is(wr.Err, context.Canceled) {
			r.Failed--
			r.CutShort++
		}
	}
	lost, err := w.checkWrites(ctx, final, writes)
	if err != nil {
		return nil, err
	}
	r.Lost = lost
	entries, err := driver.ReadAudit(ctx, remote, driver.AuditFilter{})
	if err != nil {
		return nil, err
	}
	r.Timeline, r.PauseWindow = demoTimeline(entries, t0)
	p, cutEntries, _ := controller.CutoverStatus(ctx, remote, ref)
	r.Outcome = p.Outcome
	if r.Pause = p.Pause; p.Pause != nil {
		r.PauseWindow = p.Pause.Window // from the first PAUSE sent, to the microsecond
	}
	files, err := controller.RenderFiles(final, dc)
	if err != nil {
		return nil, err
	}
	if f, ok := files.Get(render.PgDogConfigFile); ok {
		r.PgDogToml = string(f.Data)
	}
	if o.report != "" {
		if err := cutoverReport(o.report, "demo: cutover of default/app", p, cutEntries); err != nil {
			return nil, err
		}
	}
	r.Wall = time.Since(t0)
	r.print(out, o.report)
	return r, nil
}

var errNoPostgres = errors.New("skipped: needs postgres")

func (w *demoWorld) createShards(ctx context.Context) (*shardmap.Record, shardmap.Layout, error) {
	ddl := "CREATE TABLE " + demoTable + " (id bigint PRIMARY KEY, worker int, seq bigint, router text); GRANT ALL ON " + demoTable + " TO " + demoRole
	for _, s := range []*pglaunch.Server{w.src, w.dst} {
		if err := execSQL(ctx, s.DSN("postgres"), "CREATE ROLE "+demoRole+" LOGIN PASSWORD '"+demoPasswd+"'"); err != nil {
			return nil, shardmap.Layout{}, err
		}
	}
	mk := func(s *pglaunch.Server, name string) (shardmap.Backend, error) {
		if err := execSQL(ctx, s.DSN("postgres"), "CREATE DATABASE "+name); err != nil {
			return shardmap.Backend{}, err
		}
		if err := execSQL(ctx, s.DSN(name), ddl); err != nil {
			return shardmap.Backend{}, err
		}
		return shardmap.Backend{Host: "127.0.0.1", Port: uint16(s.Port), Database: name}, nil
	}
	var src, dst []shardmap.Backend
	for i := range demoSrcN {
		b, err := mk(w.src, fmt.Sprintf("app_s%d", i))
		if err != nil {
			return nil, shardmap.Layout{}, err
		}
		src = append(src, b)
	}
	for j := range demoDstN {
		b, err := mk(w.dst, fmt.Sprintf("app_n%d", j))
		if err != nil {
			return nil, shardmap.Layout{}, err
		}
		dst = append(dst, b)
	}
	key := shardmap.Key{Column: "id", Type: shardmap.Bigint, Tables: []string{demoTable}}
	rec := shardmap.NewPgHash(demoDB, key, src...)
	target := shardmap.NewPgHash(demoDB, key, dst...).Layout
	for j := range target.Shards {
		target.Shards[j].Name = fmt.Sprintf("n%d", j)
	}
	return rec, target, nil
}

// checkWrites counts acknowledged writes missing from the final layout's shards, and
// fails if one is stored twice, on the wrong shard, or comes from a refused write.
func (w *demoWorld) checkWrites(ctx context.Context, final *shardmap.Record, writes []refrouter.Write) (int, error) {
	where := map[int64][]int{}
	for i, s := range final.Shards {
		conn, err := pgx.Connect(ctx, w.superDSN(s.Backend))
		if err != nil {
			return 0, err
		}
		rows, err := conn.Query(ctx, "SELECT id FROM "+demoTable)
		if err != nil {
			conn.Close(ctx)
			return 0, err
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				conn.Close(ctx)
				return 0, err
			}
			where[id] = append(where[id], i)
		}
		err = rows.Err()
		conn.Close(ctx)
		if err != nil {
			return 0, err
		}
	}
	byKey := map[int64]refrouter.Write{}
	lost := 0
	for _, wr := range writes {
		byKey[wr.Key] = wr
		if !wr.Acked() {
			continue
		}
		switch got, want := where[wr.Key], int(pghash.ShardOfInt8(wr.Key, uint64(len(final.Shards)))); {
		case len(got) == 0:
			lost++
		case len(got) > 1 || got[0] != want:
			return 0, fmt.Errorf("acknowledged write %d is stored on shards %v, not once on shard %d", wr.Key, got, want)
		}
	}
	for id := range where {
		if wr, ok := byKey[id]; ok && wr.Fenced() {
			return 0, fmt.Errorf("row %d comes from a write the fence refused", id)
		}
	}
	return lost, nil
}

// demoTimeline reads the generations and the pause window from the audit log.
func demoTimeline(entries []driver.AuditEntry, t0 time.Time) ([]string, time.Duration) {
	type line struct {
		at   int64
		text string
	}
	var lines []line
	var firstPause, lastResume int64
	at := func(e driver.AuditEntry) string {
		return fmt.Sprintf("%7.2fs", float64(e.At-t0.UnixMilli())/1000)
	}
	for _, e := range entries {
		switch {
		case e.Event == driver.AuditAction && (strings.HasPrefix(e.What, "map ") || strings.HasPrefix(e.What, "cutover ended") || strings.HasPrefix(e.What, "took the lease")):
			lines = append(lines, line{e.At, at(e) + "  " + e.What})
		case e.Machine == "configpush" && e.Event == driver.AuditReport && strings.HasPrefix(e.What, "Outcome"):
			lines = append(lines, line{e.At, at(e) + "  pushed: " + e.What})
		case e.Machine == "cutover" && e.Event == driver.AuditResult && strings.HasPrefix(e.What, "WriteRecord"):
			lines = append(lines, line{e.At, at(e) + "  cutover stored the record: " + shortWhat(e.What) + " (" + e.Detail + ")"})
		case e.Machine == "cutover" && e.Event == driver.AuditExec && strings.HasPrefix(e.What, "Pause") && firstPause == 0:
			firstPause = e.At
		case e.Machine == "cutover" && e.Event == driver.AuditResult && strings.HasPrefix(e.What, "Resume") && e.OK():
			lastResume = e.At
		}
	}
	var pause time.Duration
	if firstPause > 0 && lastResume > firstPause {
		pause = time.Duration(lastResume-firstPause) * time.Millisecond
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].at < lines[j].at })
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.text
	}
	return out, pause
}

func (r *demoReport) print(out io.Writer, report string) {
	fmt.Fprintf(out, "\n===================== report =====================\n")
	fmt.Fprintf(out, "cutover %s in %v; pause window (first PAUSE to last RESUME) %v\n", r.Outcome, r.Cutover.Round(time.Millisecond), r.PauseWindow)
	fmt.Fprintf(out, "writes: %d acknowledged, %d refused by the fence, %d failed otherwise, %d cut short when the load stopped, %d lost\n", r.Acked, r.Fenced, r.Failed, r.CutShort, r.Lost)
	if r.Pause != nil {
		printPause(out, *r.Pause, pauseWidth)
	}
	fmt.Fprintln(out, "generation timeline:")
	for _, l := range r.Timeline {
		fmt.Fprintln(out, "  "+l)
	}
	fmt.Fprintln(out, "pgdog.toml of the new generation:")
	fmt.Fprint(out, indent(r.PgDogToml))
	if report != "" {
		fmt.Fprintf(out, "picture of the cutover: %s\n", report)
	}
	fmt.Fprintf(out, "demo wall time %v\n", r.Wall.Round(time.Millisecond))
}

// demoSetup is the controller side both demos share: loam.toml in root, on a free listen
// address, with a fresh API token, loaded; the first record stored.
type demoSetup struct {
	root, listen, confPath, token string
	cfg                           *controller.Config
}

// setUpDemo writes conf(listen) as root's loam.toml, sets env and LOAM_DEMO_TOKEN (a fresh
// token) in the environment it names, loads it, and stores rec as ref's first version.
func setUpDemo(ctx context.Context, root string, conf func(listen string) string, env map[string]string, ref adapters.DBRef, rec *shardmap.Record) (*demoSetup, error) {
	d := &demoSetup{root: root, confPath: filepath.Join(root, "loam.toml")}
	var err error
	if d.listen, err = freeAddr(); err != nil {
		return nil, err
	}
	if err := os.WriteFile(d.confPath, []byte(conf(d.listen)), 0o600); err != nil {
		return nil, err
	}
	if d.token, err = demoToken(); err != nil {
		return nil, err
	}
	for k, v := range env {
		os.Setenv(k, v)
	}
	os.Setenv("LOAM_DEMO_TOKEN", d.token)
	if d.cfg, err = controller.LoadConfig(d.confPath); err != nil {
		return nil, err
	}
	if err := storeFirstRecord(ctx, d.cfg, ref, rec); err != nil {
		return nil, err
	}
	return d, nil
}

// start runs the daemon with c's opener (startDemoDaemon) and waits until its store API
// answers; stop drains it.
func (d *demoSetup) start(ctx context.Context, c *cli) (logPath string, stop func(), remote *httpstore.Client, err error) {
	if logPath, stop, err = startDemoDaemon(ctx, c, d.root, d.confPath); err != nil {
		return "", nil, nil, err
	}
	if remote, err = waitForStore(ctx, "http://"+d.listen, d.token); err != nil {
		stop()
		return "", nil, nil, err
	}
	return logPath, stop, remote, nil
}

// startDemoDaemon runs `loamrouter serve` on confPath in this process, its log in root's
// controller.log; stop drains it (what is in flight finishes and is recorded).
func startDemoDaemon(ctx context.Context, c *cli, root, confPath string) (logPath string, stop func(), err error) {
	logFile, err := os.Create(filepath.Join(root, "controller.log"))
	if err != nil {
		return "", nil, err
	}
	dctx, stopDaemon := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan error, 1)
	go func() {
		root := newRootFor(c)
		root.SetArgs([]string{"--config", confPath, "--log-format", "json", "serve"})
		root.SetErr(logFile)
		root.SetOut(io.Discard)
		served <- root.ExecuteContext(dctx)
	}()
	return logFile.Name(), func() {
		stopDaemon()
		select {
		case <-served:
		case <-time.After(35 * time.Second):
		}
		logFile.Close()
	}, nil
}

// demoCLI runs one CLI command of the demo on confPath, printing it and its output when
// print is set.
func demoCLI(ctx context.Context, c *cli, confPath string, out io.Writer, print bool, args ...string) (string, error) {
	root := newRootFor(c)
	var buf strings.Builder
	root.SetOut(&buf)
	root.SetErr(&buf)
	root.SetArgs(append([]string{"--config", confPath, "--log-level", "error"}, args...))
	err := root.ExecuteContext(ctx)
	if print {
		fmt.Fprintf(out, "$ loamrouter %s\n%s", strings.Join(args, " "), indent(buf.String()))
	}
	return buf.String(), err
}

// storeFirstRecord stores rec as ref's first version in the store of the demo's loam.toml.
func storeFirstRecord(ctx context.Context, cfg *controller.Config, ref adapters.DBRef, rec *shardmap.Record) error {
	st, err := openDemoStore(cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	_, err = st.CAS(ctx, ref, 0, rec)
	return err
}

// openDemoStore opens the store of the demo's loam.toml to write the first record.
func openDemoStore(cfg *controller.Config) (Store, error) {
	if cfg.Store.Kind == "etcd" {
		return controller.OpenEtcd(&cfg.Store.Etcd)
	}
	if err := os.MkdirAll(cfg.Store.Dir, 0o700); err != nil {
		return nil, err
	}
	return boltstore.Open(filepath.Join(cfg.Store.Dir, "loam.db"), nil)
}

func demoConfig(root, listen string, o demoOptions) string {
	var routers strings.Builder
	for i := 1; i <= 3; i++ {
		fmt.Fprintf(&routers, "[[databases.routers]]\nid = \"ref-%d\"\nadmin = \"in-process\"\nnode_id = \"%d\"\n", i, i)
	}
	return fmt.Sprintf(`# The demo's controller: written by loamrouter demo.
[controller]
id = "demo-controller"
lease_ttl = %q
listen = %q
drain_timeout = "20s"
# The CLI's credential for this daemon's API (a random token made by the demo).
token_env = "LOAM_DEMO_TOKEN"

# Who the daemon's API accepts: the demo's CLI, as a controller (the fencing commands
# write machine snapshots).
[[credentials]]
name = "demo-cli"
role = "controller"
token_env = "LOAM_DEMO_TOKEN"

[store]
%s

[[databases]]
name = "app"
files_dir = %q
app_user = "app"
app_password_env = "LOAM_DEMO_APP_PW"
admin_password_env = "LOAM_DEMO_ADMIN_PW"
schema_admin = "migrator"
schema_admin_password_env = "LOAM_DEMO_COPY_PW"
insecure = true
shard_user = "postgres"
shard_sslmode = "disable"
[databases.indoubt]
period = "5s"
[databases.cutover]
designated = "ref-1"
publication = "loam_app"
lag_threshold_bytes = 1048576
poll_every = "50ms"
grace = "200ms"
retry_after = "100ms"
instance_attempts = 1
%s`, cmp.Or(o.leaseTTL, 2*time.Second).String(), listen, cmp.Or(o.store, fmt.Sprintf("dir = %q", filepath.Join(root, "loam-data"))), filepath.Join(root, "files"), routers.String())
}

// demoToken is a fresh random token for the demo's controller API.
func demoToken() (string, error) {
	var b [16]byte
	if _, err := crand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

func waitForStore(ctx context.Context, url, token string) (*httpstore.Client, error) {
	c, err := httpstore.Dial(url, &httpstore.Options{Token: token})
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := c.ListBlobs(ctx, "lease/")
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("the controller's store API at %s does not answer: %w", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitPushed waits until ConfigPush reports generation gen confirmed on n instances.
func waitPushed(ctx context.Context, st adapters.BlobStore, ref adapters.DBRef, gen uint64, n int) error {
	want := fmt.Sprintf("Outcome gen=%d ", gen)
	deadline := time.Now().Add(60 * time.Second)
	for {
		entries, err := driver.ReadAudit(ctx, st, driver.AuditFilter{Machine: "configpush", ID: ref.String()})
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.Event == driver.AuditReport && strings.HasPrefix(e.What, want) && strings.Count(confirmed(e.What), ",")+1 >= n {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("generation %d was not confirmed on %d router instances within a minute", gen, n)
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// confirmed is the confirmed=(...) list of an Outcome line.
func confirmed(what string) string {
	_, after, ok := strings.Cut(what, "confirmed=(")
	if !ok {
		return ""
	}
	list, _, _ := strings.Cut(after, ")")
	if list == "" {
		return ""
	}
	return list
}

// sleepCtx waits d, or less when ctx ends first (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
	}
	return false
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "    " + l
	}
	return strings.Join(lines, "\n") + "\n"
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// ensurePostgres finds the binaries, installing Debian's postgresql when they are missing and
// this process may (root, apt-get present); otherwise it says what to do.
func ensurePostgres(ctx context.Context, out io.Writer) (string, error) {
	bin, err := pglaunch.BinDir()
	if err == nil {
		return bin, nil
	}
	apt, aptErr := exec.LookPath("apt-get")
	if os.Geteuid() != 0 || aptErr != nil {
		return "", fmt.Errorf("the demo needs PostgreSQL (%v): install it with `sudo apt-get install postgresql` (Debian/Ubuntu) and run `make demo` again, or set %s to a directory holding initdb, postgres and pg_basebackup", err, pglaunch.EnvBinDir)
	}
	fmt.Fprintln(out, "PostgreSQL is not installed; installing Debian's postgresql package (apt-get install -y postgresql)...")
	for _, args := range [][]string{{"update", "-q"}, {"install", "-y", "-q", "--no-install-recommends", "postgresql"}} {
		cmd := exec.CommandContext(ctx, apt, args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		var log bytes.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, log.String())
		}
	}
	// The package may start its own cluster; the demo starts its own servers instead.
	_ = exec.Command("service", "postgresql", "stop").Run()
	return pglaunch.BinDir()
}

// execSQL runs statements on a connection of their own.
func execSQL(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}
