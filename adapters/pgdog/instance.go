package pgdog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/configmap"
	"loam.dev/router/kernel/render"
)

// Config says how to reach one PgDog instance and where its files are.
type Config struct {
	// ID names the instance (a pod name, or its NODE_ID).
	ID string
	// Admin is the connection string of the instance's admin database, in any form pgx
	// accepts ("postgres://admin:secret@10.0.0.5:6432/admin?sslmode=verify-full"): the
	// database and user are [admin] name and user (default admin), the password [admin]
	// password. TLS settings go here too.
	Admin string
	// Dir is the directory holding the files the instance was started with (its --config
	// and --users). Apply writes there: PgDog's RELOAD re-reads only those paths. It is
	// laid out by adapters/configmap: start PgDog with --config <Dir>/pgdog.toml and
	// --users <Dir>/users.toml, links that every generation replaces at once.
	Dir string
	// Target, when set, is where Apply writes instead of a configmap.Dir on Dir: the one
	// target of the directory several instances read (so that one lock orders their
	// writes), or a target of another kind. Its WriteFiles must have put the files where
	// the instance reads them by the time it returns; Dir then only names that place in
	// errors.
	Target adapters.ConfigTarget
	// Database is the PgDog database whose generation Observe and Apply read from SHOW POOLS
	// (the record's router name; see render.GenerationFromPools).
	Database string
	// ConnectTimeout bounds connecting to the admin database (default 5s).
	ConnectTimeout time.Duration
}

// Instance is one PgDog instance reached through its admin database. It implements
// adapters.RouterInstance and the resharding commands a cutover issues. Commands are sent
// one at a time over one connection, in the simple query protocol, one command per Query
// message; after a FATAL error (PgDog closes the connection) or a broken connection the
// next command reconnects.
type Instance struct {
	cfg    Config
	conn   *pgconn.Config
	target adapters.ConfigTarget // cfg.Target, or a configmap.Dir on cfg.Dir; nil without either

	mu     sync.Mutex
	pc     *pgconn.PgConn
	closed bool
}

var _ adapters.RouterInstance = (*Instance)(nil)

// New checks cfg and, without Config.Target, opens the directory Config.Dir (creating it
// if it does not exist); it does not connect (the first command does).
func New(cfg Config) (*Instance, error) {
	if cfg.ID == "" {
		return nil, errors.New("pgdog: Config.ID is empty; name the instance")
	}
	if cfg.Database != "" {
		if err := CheckName("database", cfg.Database); err != nil {
			return nil, err
		}
	}
	cc, err := pgconn.ParseConfig(cfg.Admin)
	if err != nil {
		return nil, fmt.Errorf("pgdog: instance %s: admin connection string: %w", cfg.ID, err)
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	cc.ConnectTimeout = cfg.ConnectTimeout
	target := cfg.Target
	if target == nil && cfg.Dir != "" {
		d, err := configmap.NewDir(cfg.Dir)
		if err != nil {
			return nil, fmt.Errorf("pgdog: instance %s: %w", cfg.ID, err)
		}
		target = d
	}
	return &Instance{cfg: cfg, conn: cc, target: target}, nil
}

// ID implements adapters.RouterInstance.
func (i *Instance) ID() string { return i.cfg.ID }

// Close closes the admin connection; later commands fail with adapters.ErrClosed.
func (i *Instance) Close() error {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.closed = true
	if i.pc != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := i.pc.Close(ctx)
		i.pc = nil
		return err
	}
	return nil
}

func (i *Instance) fail(op, code string, err error) error {
	return &adapters.RouterError{Instance: i.cfg.ID, Op: op, Code: code, Err: err}
}

// Exec sends one admin command and returns its reply. The command is sent as it is: the
// typed methods check their names first (CheckName); callers of Exec must do the same.
// Errors are *adapters.RouterError keeping the SQLSTATE: errors.Is matches ErrSyntax
// (08P01), ErrExecution (FATAL), ErrLogin (the login was refused: SQLSTATE class 28),
// adapters.ErrUnreachable (could not connect, or the
// connection broke: the command may or may not have run), or the context's error.
func (i *Instance) Exec(ctx context.Context, op, command string) (Reply, error) {
	if strings.Contains(command, ";") {
		return Reply{}, i.fail(op, "", fmt.Errorf("%w: %q: PgDog strips semicolons, so one message carries one command", ErrName, command))
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.closed {
		return Reply{}, i.fail(op, "", adapters.ErrClosed)
	}
	if i.pc == nil || i.pc.IsClosed() {
		pc, err := pgconn.ConnectConfig(ctx, i.conn)
		if err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) {
				// The server answered: a login refused is not an unreachable instance.
				if strings.HasPrefix(pe.Code, "28") {
					return Reply{}, i.fail(op, pe.Code, fmt.Errorf("%w at %s:%d as %s (check the admin password in Config.Admin): %w", ErrLogin, i.conn.Host, i.conn.Port, i.conn.User, err))
				}
				return Reply{}, i.fail(op, pe.Code, fmt.Errorf("pgdog: logging in to the admin database at %s: %w", i.conn.Host, err))
			}
			if ctx.Err() != nil {
				return Reply{}, i.fail(op, "", fmt.Errorf("pgdog: connecting to %s:%d: %w", i.conn.Host, i.conn.Port, ctx.Err()))
			}
			return Reply{}, i.fail(op, "", fmt.Errorf("%w: connecting to the admin database at %s:%d: %w", adapters.ErrUnreachable, i.conn.Host, i.conn.Port, err))
		}
		i.pc = pc
	}
	replies, err := readAll(i.pc.Exec(ctx, command))
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			sev := pe.SeverityUnlocalized
			if sev == "" {
				sev = pe.Severity
			}
			if sev == "FATAL" || sev == "PANIC" {
				i.drop()
			}
			return Reply{}, i.fail(op, pe.Code, &CommandError{Command: command, Severity: sev, Code: pe.Code, Message: pe.Message})
		}
		broken := i.pc.IsClosed()
		if broken {
			i.drop()
		}
		if ctx.Err() != nil {
			return Reply{}, i.fail(op, "", fmt.Errorf("pgdog: %q: %w", command, ctx.Err()))
		}
		if broken {
			return Reply{}, i.fail(op, "", fmt.Errorf("%w: %q: the admin connection broke (the command may have run): %w", adapters.ErrUnreachable, command, err))
		}
		return Reply{}, i.fail(op, "", fmt.Errorf("pgdog: %q: %w", command, err))
	}
	if len(replies) != 1 {
		return Reply{}, i.fail(op, "", fmt.Errorf("%w: %q: %d results, want 1", ErrReply, command, len(replies)))
	}
	return replies[0], nil
}

// readAll reads every result of a simple-protocol exchange, keeping the columns of results
// without rows too (pgconn's own ReadAll keeps them only when a row arrives).
func readAll(mrr *pgconn.MultiResultReader) ([]Reply, error) {
	var out []Reply
	for mrr.NextResult() {
		rr := mrr.ResultReader()
		var r Reply
		for _, fd := range rr.FieldDescriptions() {
			r.Columns = append(r.Columns, fd.Name)
		}
		for rr.NextRow() {
			vals := rr.Values()
			row := make([][]byte, len(vals))
			for j, v := range vals {
				if v != nil {
					row[j] = append([]byte{}, v...)
				}
			}
			r.Rows = append(r.Rows, row)
		}
		tag, err := rr.Close()
		if err != nil {
			mrr.Close()
			return nil, err
		}
		r.Tag = tag.String()
		out = append(out, r)
	}
	return out, mrr.Close()
}

func (i *Instance) drop() {
	if i.pc != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		i.pc.Close(ctx)
		cancel()
		i.pc = nil
	}
}

// command runs a command that returns no rows and checks its tag: pgdog.md says the tag is
// the command name, so a reply tagged otherwise is not the answer to this command.
func (i *Instance) command(ctx context.Context, op, cmd string) error {
	r, err := i.Exec(ctx, op, cmd)
	if err != nil {
		return err
	}
	verb, _, _ := strings.Cut(cmd, " ")
	if tagVerb, _, _ := strings.Cut(r.Tag, " "); !strings.EqualFold(tagVerb, verb) {
		return i.fail(op, "", fmt.Errorf("%w: %q answered with tag %q", ErrReply, cmd, r.Tag))
	}
	return nil
}

// withName appends checked names to a command.
func (i *Instance) withName(op, cmd string, kinds []string, names ...string) (string, error) {
	for j, n := range names {
		if n == "" {
			continue
		}
		if err := CheckName(kinds[j], n); err != nil {
			return "", i.fail(op, "", err)
		}
		cmd += " " + n
	}
	return cmd, nil
}

// Reload sends RELOAD: PgDog re-reads the files it was started with. If they do not load,
// the old config stays active and the error matches ErrExecution.
func (i *Instance) Reload(ctx context.Context) error { return i.command(ctx, "Reload", "RELOAD") }

// Pause implements adapters.RouterInstance (database "" for every database). It holds
// the clients before their next transaction is routed (MAINTENANCE ON <database>), then
// pauses the pools of the database's client users (PAUSE <user> <database> for each user of
// a SHOW POOLS row of the database that is not the schema admin), which SHOW POOLS, and so
// Observe, reports. Not PAUSE <database>, for two things PgDog 9918e963 does:
//
//   - A query held at a paused pool was routed already. When a RELOAD or a CUTOVER
//     replaces the pool, the query's checkout fails as offline and the connection retries
//     it on the new cluster with the route it had (pgdog/src/backend/pool/connection/
//     mod.rs, Connection::connect), so a write held across a change of layout lands on
//     the shard with the index the old layout gave it. Maintenance mode holds a client
//     before its request is routed (pgdog/src/frontend/client/mod.rs, client_messages),
//     and the hold survives RELOAD (pgdog/src/backend/maintenance_mode.rs).
//   - PAUSE <database> pauses every user's pools of the database, the schema admin's too
//     (pgdog/src/admin/pause.rs), and PgDog's own resharding checks connections out of
//     those (the publisher's table listing and slot creation, pgdog/src/backend/
//     replication/logical/publisher/publisher_impl.rs). A pool that a swap or a RELOAD
//     rebuilds on the same addresses inherits the pause (pgdog/src/backend/pool/
//     pool_impl.rs, move_conns_to): the reverse CUTOVER, whose swap rebuilds the source's
//     pools where they were (see Cutover), then failed with "pool: checkout timeout".
//
// A query already routed and waiting for a pool when MAINTENANCE ON lands can still be
// held at the PAUSE; the window is the time between the two commands.
func (i *Instance) Pause(ctx context.Context, database string) error {
	if err := i.maintenance(ctx, "Pause", true, database); err != nil {
		return err
	}
	pools, err := i.Pools(ctx)
	if err != nil {
		return err
	}
	seen := map[[2]string]bool{}
	for _, p := range pools {
		k := [2]string{p.User, p.Database}
		if p.SchemaAdmin || database != "" && p.Database != database || seen[k] {
			continue
		}
		seen[k] = true
		cmd, err := i.withName("Pause", "PAUSE", []string{"user", "database"}, p.User, p.Database)
		if err != nil {
			return err
		}
		if err := i.command(ctx, "Pause", cmd); err != nil {
			return err
		}
	}
	return nil
}

// Resume implements adapters.RouterInstance: RESUME <database> (bare RESUME when ""), then
// MAINTENANCE OFF <database>, releasing both holds Pause takes. The pools are resumed
// first, so the clients maintenance releases find them open.
func (i *Instance) Resume(ctx context.Context, database string) error {
	cmd, err := i.withName("Resume", "RESUME", []string{"database"}, database)
	if err != nil {
		return err
	}
	if err := i.command(ctx, "Resume", cmd); err != nil {
		return err
	}
	return i.maintenance(ctx, "Resume", false, database)
}

// Maintenance sends MAINTENANCE ON|OFF [database]: clients are held before their next
// transaction. The hold survives RELOAD; a global OFF clears every hold, per-database ones
// included; and no admin command reports it, so Observe cannot show it.
func (i *Instance) Maintenance(ctx context.Context, on bool, database string) error {
	return i.maintenance(ctx, "Maintenance", on, database)
}

// maintenance is Maintenance for op, the operation its errors name.
func (i *Instance) maintenance(ctx context.Context, op string, on bool, database string) error {
	cmd := "MAINTENANCE OFF"
	if on {
		cmd = "MAINTENANCE ON"
	}
	cmd, err := i.withName(op, cmd, []string{"database"}, database)
	if err != nil {
		return err
	}
	return i.command(ctx, op, cmd)
}

func (i *Instance) show(ctx context.Context, op, what string) (Reply, error) {
	return i.Exec(ctx, op, "SHOW "+what)
}

// Pools sends SHOW POOLS.
func (i *Instance) Pools(ctx context.Context) ([]Pool, error) {
	r, err := i.show(ctx, "Pools", "POOLS")
	if err != nil {
		return nil, err
	}
	p, err := DecodePools(r)
	if err != nil {
		return nil, i.fail("Pools", "", err)
	}
	return p, nil
}

// Settings sends SHOW CONFIG: [general], [tcp] and [memory] values only. It shows neither
// databases nor users nor any generation: the topology is visible through Pools alone.
func (i *Instance) Settings(ctx context.Context) (Settings, error) {
	r, err := i.show(ctx, "Settings", "CONFIG")
	if err != nil {
		return nil, err
	}
	s, err := DecodeSettings(r)
	if err != nil {
		return nil, i.fail("Settings", "", err)
	}
	return s, nil
}

// TaskRows sends SHOW TASKS and returns every row, subtasks included.
func (i *Instance) TaskRows(ctx context.Context) ([]TaskRow, error) {
	r, err := i.show(ctx, "Tasks", "TASKS")
	if err != nil {
		return nil, err
	}
	t, err := DecodeTasks(r)
	if err != nil {
		return nil, i.fail("Tasks", "", err)
	}
	return t, nil
}

// Tasks lists the root tasks (SHOW TASKS rows whose scope is root): the ids CUTOVER and
// STOP_TASK take. Tasks live in the instance's memory: a restart forgets them.
//
// A COPY_DATA task runs its replication as a subtask, and PgDog reports the cutover's
// stage there: while the subtask is cutting over (or rolling back, or stopping) the root
// row still says "replicating". A root task's InnerStatus is therefore its running
// subtask's when that is one of those stages (see RootTasks).
func (i *Instance) Tasks(ctx context.Context) ([]adapters.Task, error) {
	rows, err := i.TaskRows(ctx)
	if err != nil {
		return nil, err
	}
	return RootTasks(rows), nil
}

// subtaskStages are the stages a replication subtask reports that its root task's row
// does not (pgdog/src/api/replication.rs, ReplicationStatus).
var subtaskStages = []string{"cutting over", "rolling back", "stopping"}

// RootTasks is Tasks over the rows of SHOW TASKS, which lists each root task followed by
// its subtasks (pgdog/src/admin/show_tasks.rs).
//
// A COPY_DATA task's row says "replicating" before its replication subtask runs
// (pgdog/src/api/resharding.rs sets the stage, then sets the stream up), and a CUTOVER
// sent then fails with "task is not a replication task": until the subtask is listed
// running, such a root task's InnerStatus is "" (still setting up).
func RootTasks(rows []TaskRow) []adapters.Task {
	var out []adapters.Task
	streaming := false // the last root's replication subtask is running
	settle := func() {
		if n := len(out); n > 0 && !streaming && out[n-1].InnerStatus == "replicating" && strings.HasPrefix(out[n-1].Kind, "reshard ") && running(out[n-1].Status) {
			out[n-1].InnerStatus = ""
		}
	}
	for _, r := range rows {
		switch {
		case r.Root:
			settle()
			out, streaming = append(out, r.Task()), false
		case len(out) > 0 && running(r.Status) && strings.HasPrefix(r.Type, "replication "):
			streaming = true
			if root := &out[len(out)-1]; running(root.Status) && slices.Contains(subtaskStages, r.InnerStatus) {
				root.InnerStatus = r.InnerStatus
			}
		}
	}
	settle()
	return out
}

func running(status string) bool { return status == "running" || status == "started" }

// ReplicationSlots sends SHOW REPLICATION_SLOTS: the resharding slots this instance owns.
func (i *Instance) ReplicationSlots(ctx context.Context) ([]ReplicationSlot, error) {
	r, err := i.show(ctx, "ReplicationSlots", "REPLICATION_SLOTS")
	if err != nil {
		return nil, err
	}
	s, err := DecodeReplicationSlots(r)
	if err != nil {
		return nil, i.fail("ReplicationSlots", "", err)
	}
	return s, nil
}

// SlotLag reports the lag of the slots COPY_DATA named slot, reading from shards source
// shards: PgDog makes one per source shard, named <slot>_<shard number>, and lists each in
// SHOW REPLICATION_SLOTS. The lag is the largest lag_bytes among them; ok is false when one
// is not listed or its lag is NULL (TaskSlotLag).
func (i *Instance) SlotLag(ctx context.Context, slot string, shards int) (lag int64, ok bool, err error) {
	slots, err := i.ReplicationSlots(ctx)
	if err != nil {
		return 0, false, err
	}
	lag, ok = TaskSlotLag(slots, slot, shards)
	return lag, ok, nil
}

// TaskSlotLag is SlotLag over the rows of SHOW REPLICATION_SLOTS: every one of the slots
// <slot>_0 … <slot>_<shards-1> (pgdog/src/backend/replication/logical/publisher/slot.rs,
// ReplicationSlot::replication) must be listed with a known lag. A shard whose slot is
// missing would otherwise leave the lag of the others, and a stream that never started on
// it would look caught up. shards < 1 is never ok.
func TaskSlotLag(slots []ReplicationSlot, slot string, shards int) (lag int64, ok bool) {
	for shard := range shards {
		name := slot + "_" + strconv.Itoa(shard)
		i := slices.IndexFunc(slots, func(s ReplicationSlot) bool { return s.Name == name })
		if i < 0 || !slots[i].LagKnown {
			return 0, false
		}
		lag = max(lag, slots[i].LagBytes)
	}
	return lag, shards > 0
}

// Version sends SHOW VERSION: the binary's version, not the config's.
func (i *Instance) Version(ctx context.Context) (string, error) {
	r, err := i.show(ctx, "Version", "VERSION")
	if err != nil {
		return "", err
	}
	v, err := oneValue("SHOW VERSION", r, "version")
	if err != nil {
		return "", i.fail("Version", "", err)
	}
	return v, nil
}

// Peers sends SHOW PEERS: the addresses of the other instances PgDog discovered (only when
// broadcast_address is set; the discovery is by UDP broadcast and PgDog calls it unreliable).
func (i *Instance) Peers(ctx context.Context) ([]string, error) {
	r, err := i.show(ctx, "Peers", "PEERS")
	if err != nil {
		return nil, err
	}
	t := newTable("SHOW PEERS", r)
	t.require("addr")
	var out []string
	for j := range r.Rows {
		out = append(out, t.text(j, "addr"))
	}
	if t.err != nil {
		return nil, i.fail("Peers", "", t.err)
	}
	return out, nil
}

// Generation reads the generation of Config.Database's files from SHOW POOLS rows (the
// marker kernel/render writes; see render.GenerationFromPools).
func (i *Instance) generation(pools []Pool) (uint64, bool, error) {
	if i.cfg.Database == "" {
		return 0, false, nil
	}
	rows := make([]render.PoolRow, len(pools))
	for j, p := range pools {
		rows[j] = p.Row()
	}
	return render.GenerationFromPools(i.cfg.Database, rows)
}

// Observe implements adapters.RouterInstance with SHOW VERSION, SHOW POOLS, SHOW TASKS and
// SHOW PEERS. PgDog has no generation: it is read from the marker pool the rendered files
// create (GenerationKnown is false without one). Paused lists the databases with a paused
// pool. Maintenance holds are not reported by any admin command, so they are not here.
func (i *Instance) Observe(ctx context.Context) (adapters.Observed, error) {
	var o adapters.Observed
	var err error
	if o.Version, err = i.Version(ctx); err != nil {
		return o, err
	}
	pools, err := i.Pools(ctx)
	if err != nil {
		return o, err
	}
	if o.Generation, o.GenerationKnown, err = i.generation(pools); err != nil {
		return o, i.fail("Observe", "", err)
	}
	for _, p := range pools {
		if p.Paused && !slices.Contains(o.Paused, p.Database) {
			o.Paused = append(o.Paused, p.Database)
		}
	}
	slices.Sort(o.Paused)
	if o.Tasks, err = i.Tasks(ctx); err != nil {
		return o, err
	}
	if o.Peers, err = i.Peers(ctx); err != nil {
		return o, err
	}
	return o, nil
}

// Apply implements adapters.RouterInstance: write the files as generation (through
// Config.Target, by default a configmap.Dir on Config.Dir: every file of the generation
// replaces the last at once), RELOAD, then read SHOW POOLS. A generation older than the
// one in place is refused before anything is reloaded (the error matches
// adapters.ErrNewerGeneration): a late Apply never takes an instance backwards. The
// generation must show in SHOW POOLS: files rendered by kernel/render carry a marker, and
// an instance that reloaded without showing it did not read Config.Dir (ErrNotLoaded).
func (i *Instance) Apply(ctx context.Context, generation uint64, files render.Files) (adapters.Applied, error) {
	if i.target == nil {
		return adapters.Applied{}, i.fail("Apply", "", errors.New("pgdog: no config directory to write the files to (set Config.Dir to the directory of the instance's --config and --users files)"))
	}
	if err := i.target.WriteFiles(ctx, generation, files); err != nil {
		return adapters.Applied{}, i.fail("Apply", "", err)
	}
	if err := i.Reload(ctx); err != nil {
		return adapters.Applied{}, err
	}
	pools, err := i.Pools(ctx)
	if err != nil {
		return adapters.Applied{}, err
	}
	g, known, err := i.generation(pools)
	if err != nil {
		return adapters.Applied{}, i.fail("Apply", "", err)
	}
	if !known || g != generation {
		got := "no generation marker"
		if known {
			got = fmt.Sprintf("generation %d", g)
		}
		return adapters.Applied{Generation: g}, i.fail("Apply", "", fmt.Errorf("%w: wrote generation %d into %s and RELOAD succeeded, but SHOW POOLS shows %s for %q (is the instance started with --config and --users in that directory?)",
			ErrNotLoaded, generation, i.where(), got, i.cfg.Database))
	}
	return adapters.Applied{Generation: g}, nil
}

// where names the place Apply writes to, for errors.
func (i *Instance) where() string {
	if s, ok := i.target.(fmt.Stringer); ok {
		return s.String()
	}
	if i.cfg.Dir == "" {
		return fmt.Sprintf("the target %T", i.target)
	}
	return i.cfg.Dir
}
