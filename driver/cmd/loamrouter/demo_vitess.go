package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"loam.dev/router/adapters"
	"loam.dev/router/controller"
	"loam.dev/router/driver"
	"loam.dev/router/kernel/keyrange"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/vitesslaunch"
)

// errNoVitess: `demo --vitess` on a machine without the Vitess programs.
var errNoVitess = errors.New("skipped: needs vitess")

const demoKeyspace = "demo"

// vitessDemoReport is what `demo --vitess` measured.
type vitessDemoReport struct {
	Wall, Cutover       time.Duration
	Outcome             string
	Copy, Switch, Pause time.Duration
	Acked               int
	Refused             int64
	Lost, Misplaced     int
	Shards              []vitesslaunch.ShardRows
}

// vitessHolding reports whether a Vitess cutover holds after the switch: vtgate's check
// passed, Complete not sent, so ReverseTraffic is still possible until `cutover finalize`.
func vitessHolding(p controller.CutoverProgress) bool {
	return p.Vitess && p.Outcome == "" && p.Current == "hold"
}

// vreshardFigures reads the copy (Create sent to the first Status saying the copy is done)
// and the switch of the writes (sent, answered) from a Vitess cutover's audit entries.
func vreshardFigures(entries []driver.AuditEntry) (copyTime time.Duration, writes0, writes1 time.Time) {
	var created, copied int64
	for _, e := range entries {
		stage := e.Step[strings.LastIndexByte(e.Step, '/')+1:]
		switch {
		case e.Event == driver.AuditExec && stage == "create" && created == 0:
			created = e.At
		case e.Event == driver.AuditResult && stage == "copy" && copied == 0 && strings.Contains(e.Detail, "copying=false"):
			copied = e.At
		case e.Event == driver.AuditExec && stage == "writes":
			writes0 = time.UnixMilli(e.At)
		case e.Event == driver.AuditResult && stage == "writes" && e.OK():
			writes1 = time.UnixMilli(e.At)
		}
	}
	return time.Duration(copied-created) * time.Millisecond, writes0, writes1
}

// runVitessDemo is `demo --vitess`: a throwaway Vitess (etcd, vtctld, one primary vttablet
// per shard on MariaDB, vtgate), keyspace demo of one shard 0 resharded into -80 and 80- by
// the controller (`cutover plan|start` through `loamrouter serve`) while writers insert
// through vtgate; then every acknowledged row is looked for on the shard the record locates
// it on.
func runVitessDemo(ctx context.Context, out io.Writer, o demoOptions) (*vitessDemoReport, error) {
	t0 := time.Now()
	if o.workers <= 0 {
		o.workers = 8
	}
	if o.steady <= 0 {
		o.steady = 2 * time.Second
	}
	if _, err := vitesslaunch.FindBinaries(); err != nil {
		return nil, fmt.Errorf("%w: demo --vitess runs a real Vitess %s: set %s to the directory holding vtctld, vtctldclient, vttablet, mysqlctl and vtgate (conformance/vitesstest/vitessbin/build.sh builds them); it also needs etcd-server and mariadb-server: %v",
			errNoVitess, vitesslaunch.Version, vitesslaunch.EnvBinDir, err)
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
	root, err := os.MkdirTemp("", "loam-demo-")
	if err != nil {
		return nil, err
	}
	if o.keep {
		defer fmt.Fprintf(out, "kept %s (the store, controller.log)\n", root)
	} else {
		cleanups = append(cleanups, func() { os.RemoveAll(root) })
	}

	say("starting Vitess %s: etcd, vtctld (%s)", vitesslaunch.Version, os.Getenv(vitesslaunch.EnvBinDir))
	vt, err := vitesslaunch.Open()
	if err != nil {
		return nil, err
	}
	cleanups = append(cleanups, func() { _ = vt.Close() })
	if err := vt.NewKeyspace(ctx, demoKeyspace); err != nil {
		return nil, err
	}
	say("keyspace %s: shard 0 (a vttablet on MariaDB), table t sharded by the hash vindex on id", demoKeyspace)
	src, err := vt.StartShards(ctx, demoKeyspace, "0")
	if err != nil {
		return nil, err
	}
	for _, args := range [][]string{{"ApplySchema", "--sql", vitesslaunch.WriterSchema, demoKeyspace}, {"ApplyVSchema", "--vschema", vitesslaunch.WriterVSchema, demoKeyspace}} {
		if _, err := vt.Vtctldclient(ctx, args...); err != nil {
			return nil, err
		}
	}
	say("target shards -80 and 80- (not serving yet), and vtgate")
	tgt, err := vt.StartShards(ctx, demoKeyspace, "-80", "80-")
	if err != nil {
		return nil, err
	}
	g, err := vt.OpenVtgate(demoKeyspace)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "    vtctld %s, vtgate 127.0.0.1:%d; source 0 on MariaDB 127.0.0.1:%d, -80 on :%d, 80- on :%d\n",
		vt.VtctldAddr, g.MySQLPort, src[0].MySQLPort, tgt[0].MySQLPort, tgt[1].MySQLPort)

	// The controller's configuration, and the record of keyspace demo: one shard 0.
	rec, err := oneShardRecord(demoKeyspace, src[0])
	if err != nil {
		return nil, err
	}
	ref := adapters.DBRef{Namespace: "default", Database: demoDB}
	setup, err := setUpDemo(ctx, root, func(listen string) string { return vitessDemoConfig(root, listen, vt.VtctldAddr, g) },
		map[string]string{"LOAM_DEMO_APP_PW": demoPasswd, "LOAM_DEMO_VTGATE_PW": g.Password}, ref, rec)
	if err != nil {
		return nil, err
	}
	confPath := setup.confPath
	say("shard map: %s generation 1, keyspace %s, vindex hash on id, one shard 0 (embedded store %s)", ref, demoKeyspace, setup.cfg.Store.Dir)

	c := &cli{}
	logPath, stop, remote, err := setup.start(ctx, c)
	if err != nil {
		return nil, err
	}
	cleanups = append(cleanups, stop)
	defer remote.Close()
	say("controller running; its log in %s", logPath)
	runCLI := func(args ...string) (string, error) { return demoCLI(ctx, c, confPath, out, true, args...) }

	// The load.
	db, err := sql.Open("mysql", g.DSN(demoKeyspace))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	w := vitesslaunch.NewWriter(db)
	if err := w.Preload(ctx, 1000); err != nil {
		return nil, err
	}
	w.Start(ctx, o.workers)
	cleanups = append(cleanups, w.Stop)
	say("%d writers inserting through vtgate (1000 rows before); steady state for %v", o.workers, o.steady)
	if !sleepCtx(ctx, o.steady) {
		return nil, ctx.Err()
	}

	// The cutover: Vitess's Reshard, driven by the controller.
	if _, err := runCLI("cutover", "plan", demoDB, "--to", "-80,80-", "--workflow", "split"); err != nil {
		return nil, fmt.Errorf("the plan does not hold: %w", err)
	}
	cutStart := time.Now()
	if _, err := runCLI("cutover", "start", demoDB, "--to", "-80,80-", "--workflow", "split"); err != nil {
		return nil, err
	}
	last := ""
	var p controller.CutoverProgress
	finalized := false
	for {
		if p, _, err = controller.CutoverStatus(ctx, remote, ref); err != nil {
			return nil, err
		}
		if p.Current != last || p.Outcome != "" {
			fmt.Fprintf(out, "    %s %-8s  (+%s)\n", progressBar(p), p.Current, time.Since(cutStart).Round(time.Millisecond))
			last = p.Current
		}
		if p.Outcome != "" {
			break
		}
		if !finalized && vitessHolding(p) {
			// The hold: the target serves, the workflow stands, a rollback would still
			// reverse the traffic. Finalize completes it.
			finalized = true
			say("holding after the switch (ReverseTraffic still possible); finalizing")
			if _, err := runCLI("cutover", "finalize", demoDB); err != nil {
				return nil, err
			}
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return nil, ctx.Err()
		}
	}
	r := &vitessDemoReport{Cutover: time.Since(cutStart), Outcome: p.Outcome}
	if _, err := runCLI("cutover", "status", demoDB); err != nil {
		return nil, err
	}
	if !sleepCtx(ctx, o.steady/2) {
		return nil, ctx.Err()
	}
	w.Stop()

	// What happened to every write.
	final, err := remote.Read(ctx, ref)
	if err != nil {
		return nil, err
	}
	r.Shards, err = w.Check(ctx, tgt, func(id int64) (string, error) {
		loc, err := final.Layout.Locate(strconv.FormatInt(id, 10))
		return loc.Name, err
	})
	if err != nil {
		return nil, err
	}
	for _, s := range r.Shards {
		r.Lost += s.Lost
		r.Misplaced += s.Misplaced
	}
	r.Acked, r.Refused = w.Acked(), w.Refused()
	entries, err := driver.ReadAudit(ctx, remote, driver.AuditFilter{Machine: "vreshard", ID: ref.String()})
	if err != nil {
		return nil, err
	}
	var w0, w1 time.Time
	r.Copy, w0, w1 = vreshardFigures(entries)
	r.Switch, r.Pause = w1.Sub(w0), w.LongestPause(w0, w1)
	if _, err := runCLI("locate", demoDB, "42"); err != nil {
		return nil, err
	}
	r.Wall = time.Since(t0)
	r.print(out, final)
	return r, nil
}

func (r *vitessDemoReport) print(out io.Writer, final *shardmap.Record) {
	fmt.Fprintf(out, "\n===================== report =====================\n")
	fmt.Fprintf(out, "Vitess cutover (Reshard 0 -> -80,80-) %s in %v; the record at generation %d serves %s\n", r.Outcome, r.Cutover.Round(time.Millisecond),
		final.Generation, strings.Join(shardNames(final), ","))
	fmt.Fprintf(out, "copy %v; SwitchTraffic of the writes %v; longest write pause through vtgate around it %v\n",
		r.Copy, r.Switch, r.Pause.Round(time.Millisecond))
	fmt.Fprintf(out, "writes: %d acknowledged, %d refused by vtgate (not acknowledged), %d lost, %d on another shard than the record locates\n", r.Acked, r.Refused, r.Lost, r.Misplaced)
	for _, s := range r.Shards {
		fmt.Fprintf(out, "  shard %-4s %6d rows (crc32 sum %d), expected %d (%d)\n", s.Shard, s.Rows, s.Sum, s.WantRows, s.WantSum)
	}
	fmt.Fprintf(out, "demo wall time %v\n", r.Wall.Round(time.Millisecond))
}

func shardNames(rec *shardmap.Record) []string {
	var out []string
	for _, s := range rec.Shards {
		out = append(out, s.Name)
	}
	return out
}

func vitessDemoConfig(root, listen, vtctld string, g *vitesslaunch.Gate) string {
	return fmt.Sprintf(`# The Vitess demo's controller: written by loamrouter demo --vitess.
[controller]
id = "demo-controller"
lease_ttl = "2s"
listen = %q
drain_timeout = "20s"
token_env = "LOAM_DEMO_TOKEN"

[[credentials]]
name = "demo-cli"
role = "controller"
token_env = "LOAM_DEMO_TOKEN"

[store]
dir = %q

[[databases]]
name = "app"
files_dir = %q
app_user = "app"
app_password_env = "LOAM_DEMO_APP_PW"
[databases.indoubt]
enabled = false
%s`, listen, filepath.Join(root, "loam-data"), filepath.Join(root, "files"), vitessTOML(vtctld, g, "LOAM_DEMO_VTGATE_PW"))
}

// vitessTOML is the [databases.vitess] table for the throwaway Vitess: its vtctld, and
// vtgate g as the user whose password the environment variable pwEnv holds.
func vitessTOML(vtctld string, g *vitesslaunch.Gate, pwEnv string) string {
	return fmt.Sprintf(`[databases.vitess]
vtctld = %q
timeout = "60s"
cell = %q
vtgate = "127.0.0.1:%d"
vtgate_user = %q
vtgate_password_env = %q
poll_every = "500ms"
max_lag = "10s"
`, vtctld, vitesslaunch.Cell, g.MySQLPort, g.User, pwEnv)
}

// oneShardRecord is the record of keyspace served by one shard 0 on tablet tb, routed by
// the hash vindex on id of table t (vitesslaunch's writer table).
func oneShardRecord(keyspace string, tb *vitesslaunch.Tablet) (*shardmap.Record, error) {
	rec, err := shardmap.NewVindex(keyspace, shardmap.Key{Column: "id", Type: shardmap.Bigint, Tables: []string{"t"}}, shardmap.VindexHash,
		shardmap.Backend{Host: "127.0.0.1", Port: uint16(tb.MySQLPort), Database: tb.DBName(), Tablet: tb.Alias})
	if err != nil {
		return nil, err
	}
	rec.Shards[0].Name = "0"
	v := rec.Layout.Scheme.(shardmap.Vindex)
	v.Ranges = []keyrange.Range{keyrange.MustParse("0")}
	rec.Layout.Scheme = v
	return rec, nil
}
