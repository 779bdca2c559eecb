package refrouter

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"loam.dev/router/adapters"
	"loam.dev/router/kernel/shardmap"
)

// Resharder stands in for PgDog's resharding commands on a designated instance (the
// cutover's adapters.Resharder), with Postgres's own logical replication doing the copy and
// the catch-up:
//
//   - CopyData: on every source shard i, a publication per destination shard j whose row
//     filter selects the rows j holds under the target's hash scheme
//     (satisfies_hash_partition, Postgres's own partition routing, which is PgDog's hash);
//     on every destination shard j a subscription to each source shard (initial copy, then
//     streaming). The task is "syncing data" until every table is synchronised, then
//     "replicating".
//   - SlotLag: the largest lag, in bytes of WAL, of the task's slots.
//   - Tasks: once every table is synchronised, the stream back (destination to source) is
//     made, before any pause: its publications and slots on the destination shards, its
//     subscriptions on the source shards, disabled (prepareBack); the task reads
//     "replicating" only once it is made, so the machine pauses nothing before.
//   - Cutover: drain (a barrier row written on every source shard, through the superuser
//     the replication uses, not the fenced role, must arrive on every destination shard),
//     then, at once, halt the forward subscriptions on the destination shards (halt:
//     disabled, their apply workers ended) and start the stream back from the
//     destination's WAL as it is after the drain (startBack: its replication origins set
//     there, its subscriptions enabled), then swap the two database names in the
//     designated router's memory (Router.Swap, as PgDog's CUTOVER does); the forward
//     stream is dropped after that, outside the pause (dropHalted). So the CUTOVER, run
//     while writes wait, creates no slot (a slot waits for the server's running
//     transactions), no subscription and no drop through the publisher (each opens a
//     replication connection); connections are pooled per shard database, so it opens
//     none either. A task whose stream back was not made before (the reverse cutover's,
//     or one whose preparation failed) makes it inside the CUTOVER, after the drain, as
//     before: a new slot starts there anyway.
//   - StopTask: drop a task's subscriptions and publications.
//
// It supports hash (pg_hash) layouts, which is what satisfies_hash_partition can filter.
// The servers need wal_level = logical and room for the slots and workers: every pair of a
// source and a destination shard is one subscription, one slot and one apply worker.
type Resharder struct {
	router *Router
	db     string
	key    shardmap.Key
	source shardmap.Layout
	target shardmap.Layout
	dsn    func(shardmap.Backend) string

	mu    sync.Mutex
	tasks []*streamTask
	next  int64

	// pools hold a connection pool per shard database, opened on first use (CopyData, long
	// before the pause), so that Cutover sets up no connection while writes wait.
	poolMu sync.Mutex
	pools  map[string]*pgxpool.Pool

	// cleanups are the drops of halted streams after their CUTOVER; Close waits for them
	// and returns cleanupErr.
	cleanups   sync.WaitGroup
	cleanupMu  sync.Mutex
	cleanupErr error
}

var _ adapters.Resharder = (*Resharder)(nil)

// listedKind is the task's type as SHOW TASKS lists its root row, as PgDog 9918e963 does
// (adapters/pgdog/testdata/transcript-pg16.json): a COPY_DATA is "reshard <source> ->
// <destination>" (what the cutover machine recognises its own copy by after a restart,
// cutover.CopyOf), the stream back a CUTOVER starts "replication <source> ->
// <destination> (reverse)", named by the databases of the copy it reverses.
func (t *streamTask) listedKind() string {
	switch t.kind {
	case "copy_data":
		return "reshard " + t.fromDB + " -> " + t.toDB
	case "replication":
		return "replication " + t.fromDB + " -> " + t.toDB + " (reverse)"
	}
	return t.kind
}

// streamTask is one replication stream from one layout to another.
type streamTask struct {
	id      int64
	kind    string // "copy_data" or "replication"
	status  string // running, finished, cancelled, "failed: <msg>"
	inner   string
	started time.Time
	from    shardmap.Layout
	to      shardmap.Layout
	fromDB  string // database names in the router before the task's cutover
	toDB    string
	pub     string
	slot    string
	synced  bool

	// prepared is closed once the stream back's preparation, started when the copy is
	// synchronised, has ended; back is then the stream back it made (nil if it failed).
	prepared chan struct{}
	back     *streamTask
}

// Helper tables the resharder creates in every shard database it touches.
const (
	keyTable  = "loam_reshard_key"  // an empty PARTITION BY HASH table: the row filter's routing
	syncTable = "loam_reshard_sync" // barrier rows, replicated with the data
)

// NewResharder returns the resharder of router, the designated instance, for rec: a
// record in phase Resharding whose Layout is the source and Target the destination, both
// pg_hash. dsn gives a superuser connection string for a shard's database; subscriptions
// connect with it too (the replication role is not the fenced one).
func NewResharder(router *Router, rec *shardmap.Record, dsn func(shardmap.Backend) string) (*Resharder, error) {
	if rec.Target == nil {
		return nil, errors.New("refrouter: the record has no reshard target")
	}
	for _, l := range []shardmap.Layout{rec.Layout, *rec.Target} {
		if _, ok := l.Scheme.(shardmap.PgHash); !ok {
			return nil, fmt.Errorf("refrouter: the resharder filters rows with Postgres hash partitioning; a %s layout is not supported", shardmap.SchemeKind(l.Scheme))
		}
	}
	key := rec.Scheme.ShardKey()
	if len(key.Tables) == 0 {
		return nil, errors.New("refrouter: the resharder needs the key's tables named (publications list their tables)")
	}
	// Task ids start at 0, as PgDog's do after a start (pgdog/src/api/async_task.rs), so the
	// cutovers run through reference routers meet task 0 too.
	return &Resharder{router: router, db: rec.Router.Name, key: key, source: rec.Layout.Clone(), target: rec.Target.Clone(), dsn: dsn, next: 0}, nil
}

func (rs *Resharder) fail(op string, err error) error {
	return &adapters.RouterError{Instance: rs.router.ID(), Op: op, Err: err}
}

// CopyData implements adapters.Resharder.
func (rs *Resharder) CopyData(ctx context.Context, source, destination, publication, slot string) (int64, error) {
	if err := rs.router.reachable("CopyData"); err != nil {
		return 0, err
	}
	if source != rs.db {
		return 0, rs.fail("CopyData", fmt.Errorf("refrouter: source %q is not the record's database %q", source, rs.db))
	}
	rs.mu.Lock()
	for _, t := range rs.tasks {
		if t.slot == slot && t.status == "running" {
			rs.mu.Unlock()
			return t.id, nil // a retry: the task it started is still running
		}
	}
	rs.mu.Unlock()
	t := &streamTask{kind: "copy_data", status: "running", inner: "syncing data", started: time.Now(),
		from: rs.source, to: rs.target, fromDB: source, toDB: destination, pub: publication, slot: slot}
	if err := rs.prepare(ctx, rs.source, rs.target); err != nil {
		return 0, rs.fail("CopyData", err)
	}
	if err := rs.stream(ctx, t, true); err != nil {
		return 0, rs.fail("CopyData", err)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	t.id = rs.next
	rs.next++
	rs.tasks = append(rs.tasks, t)
	return t.id, nil
}

// pool returns the connection pool of one shard database (as the superuser), opening it
// on first use.
func (rs *Resharder) pool(ctx context.Context, b shardmap.Backend) (*pgxpool.Pool, error) {
	rs.poolMu.Lock()
	defer rs.poolMu.Unlock()
	if p, ok := rs.pools[backendName(b)]; ok {
		return p, nil
	}
	cfg, err := pgxpool.ParseConfig(rs.dsn(b))
	if err != nil {
		return nil, fmt.Errorf("refrouter: the connection string of %s: %w", backendName(b), err)
	}
	cfg.MaxConns = 8
	// Inside the pause the CUTOVER works on a shard database over two connections at once
	// (the forward stream's halt and the stream back's start): kept open, no connection is
	// set up while writes wait.
	cfg.MinConns = 2
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("refrouter: connecting to %s: %w", backendName(b), err)
	}
	if rs.pools == nil {
		rs.pools = map[string]*pgxpool.Pool{}
	}
	rs.pools[backendName(b)] = p
	return p, nil
}

// exec runs statements on one shard database as the superuser, in order.
func (rs *Resharder) exec(ctx context.Context, b shardmap.Backend, sqls ...string) error {
	p, err := rs.pool(ctx, b)
	if err != nil {
		return err
	}
	for _, q := range sqls {
		if _, err := p.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("refrouter: on %s: %s: %w", backendName(b), q, err)
		}
	}
	return nil
}

// batch runs statements on one shard database as the superuser in one round trip: one
// simple-protocol query, so one implicit transaction (all or none; no statement that
// refuses a transaction block), and returns the rows of the last statement as text. The
// CUTOVER uses it inside the pause, where every round trip is paid by every paused write.
func (rs *Resharder) batch(ctx context.Context, b shardmap.Backend, sqls ...string) ([][][]byte, error) {
	p, err := rs.pool(ctx, b)
	if err != nil {
		return nil, err
	}
	conn, err := p.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("refrouter: connecting to %s: %w", backendName(b), err)
	}
	defer conn.Release()
	q := strings.Join(sqls, "; ")
	res, err := conn.Conn().PgConn().Exec(ctx, q).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("refrouter: on %s: %s: %w", backendName(b), q, err)
	}
	if len(res) == 0 {
		return nil, nil
	}
	return res[len(res)-1].Rows, nil
}

// literal quotes s as an SQL string constant (standard_conforming_strings is on, as it is
// by default since Postgres 9.1). CREATE SUBSCRIPTION takes no parameters, so its
// connection string and slot name must be written into the statement.
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func backendName(b shardmap.Backend) string {
	return b.Host + ":" + strconv.Itoa(int(b.Port)) + "/" + b.Database
}

var keyTypes = map[shardmap.KeyType]string{shardmap.Bigint: "bigint", shardmap.Integer: "integer", shardmap.Text: "text", shardmap.UUID: "uuid"}

// prepare creates the helper tables on every shard of both layouts (each can publish: the
// forward stream from one, the reverse stream from the other).
func (rs *Resharder) prepare(ctx context.Context, layouts ...shardmap.Layout) error {
	ddl := []string{
		"CREATE TABLE IF NOT EXISTS " + keyTable + " (k " + keyTypes[rs.key.Type] + ") PARTITION BY HASH (k)",
		"CREATE TABLE IF NOT EXISTS " + syncTable + " (origin text, token bigint, PRIMARY KEY (origin, token))",
	}
	var shards []shardmap.Shard
	for _, l := range layouts {
		shards = append(shards, l.Shards...)
	}
	return each(len(shards), func(i int) error { return rs.exec(ctx, shards[i].Backend, ddl...) })
}

func (t *streamTask) pubName(j int) string { return t.pub + "_" + strconv.Itoa(j) }
func (t *streamTask) subName(i, j int) string {
	return t.slot + "_" + strconv.Itoa(i) + "_" + strconv.Itoa(j)
}

// stream starts t: publications on t.from's shards, subscriptions on t.to's, each shard's
// statements on their own connection, in parallel.
func (rs *Resharder) stream(ctx context.Context, t *streamTask, copyData bool) error {
	if err := rs.publish(ctx, t); err != nil {
		return err
	}
	return rs.subscribe(ctx, t, copyData, true, true)
}

// publish creates t's publications on t.from's shards.
func (rs *Resharder) publish(ctx context.Context, t *streamTask) error {
	n := len(t.to.Shards)
	col := pgx.Identifier{rs.key.Column}.Sanitize()
	return each(len(t.from.Shards), func(i int) error {
		var sqls []string
		for j := range n {
			var tables string
			for _, tb := range rs.key.Tables {
				tables += pgx.Identifier{tb}.Sanitize() + " WHERE (satisfies_hash_partition('" + keyTable + "'::regclass, " +
					strconv.Itoa(n) + ", " + strconv.Itoa(j) + ", " + col + ")), "
			}
			sqls = append(sqls, "CREATE PUBLICATION "+pgx.Identifier{t.pubName(j)}.Sanitize()+" FOR TABLE "+tables+syncTable)
		}
		return rs.exec(ctx, t.from.Shards[i].Backend, sqls...)
	})
}

// slots creates the replication slots of t's subscriptions on t.from's shards: a slot made
// by CREATE SUBSCRIPTION is made the same way, but on a connection the subscriber opens
// then, and after whatever else that subscriber's server is doing.
func (rs *Resharder) slots(ctx context.Context, t *streamTask) error {
	n, m := len(t.to.Shards), len(t.from.Shards)
	return each(n*m, func(k int) error {
		j, i := k/m, k%m
		return rs.exec(ctx, t.from.Shards[i].Backend, "SELECT pg_create_logical_replication_slot("+literal(t.subName(i, j))+", 'pgoutput')")
	})
}

// dropSlots drops t's slots that exist on t.from's shards (after slots, when the stream is
// given up before its subscriptions were made).
func (rs *Resharder) dropSlots(ctx context.Context, t *streamTask) error {
	n, m := len(t.to.Shards), len(t.from.Shards)
	return each(n*m, func(k int) error {
		j, i := k/m, k%m
		return rs.exec(ctx, t.from.Shards[i].Backend, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = "+literal(t.subName(i, j)))
	})
}

// subscribe creates t's subscriptions on t.to's shards; without createSlot their slots
// must exist (slots); without enabled they stream nothing until enabled (startBack).
func (rs *Resharder) subscribe(ctx context.Context, t *streamTask, copyData, createSlot, enabled bool) error {
	n, m := len(t.to.Shards), len(t.from.Shards)
	return each(n*m, func(k int) error {
		j, i := k/m, k%m
		sub := t.subName(i, j)
		return rs.exec(ctx, t.to.Shards[j].Backend, "CREATE SUBSCRIPTION "+pgx.Identifier{sub}.Sanitize()+" CONNECTION "+
			literal(rs.dsn(t.from.Shards[i].Backend))+" PUBLICATION "+pgx.Identifier{t.pubName(j)}.Sanitize()+
			" WITH (slot_name = "+literal(sub)+", copy_data = "+strconv.FormatBool(copyData)+", create_slot = "+strconv.FormatBool(createSlot)+
			", enabled = "+strconv.FormatBool(enabled)+")")
	})
}

// unstream drops t's subscriptions (and with them their slots), then its publications.
func (rs *Resharder) unstream(ctx context.Context, t *streamTask) error {
	n, m := len(t.to.Shards), len(t.from.Shards)
	err := each(n*m, func(k int) error {
		j, i := k/m, k%m
		return rs.exec(ctx, t.to.Shards[j].Backend, "DROP SUBSCRIPTION IF EXISTS "+pgx.Identifier{t.subName(i, j)}.Sanitize())
	})
	return errors.Join(err, each(m, func(i int) error {
		var sqls []string
		for j := range n {
			sqls = append(sqls, "DROP PUBLICATION IF EXISTS "+pgx.Identifier{t.pubName(j)}.Sanitize())
		}
		return rs.exec(ctx, t.from.Shards[i].Backend, sqls...)
	}))
}

// each runs f(0) ... f(n-1) in parallel and joins their errors.
func each(n int, f func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// refresh moves a copy task from syncing to replicating once every subscribed table is
// ready on every destination shard.
func (rs *Resharder) refresh(ctx context.Context, t *streamTask) error {
	if t.synced || t.status != "running" {
		return nil
	}
	for j, to := range t.to.Shards {
		var subs []string
		for i := range t.from.Shards {
			subs = append(subs, t.subName(i, j))
		}
		p, err := rs.pool(ctx, to.Backend)
		if err != nil {
			return err
		}
		var waiting, present int
		err = p.QueryRow(ctx, `SELECT count(*) FILTER (WHERE r.srsubstate <> 'r'), count(DISTINCT s.oid)
			FROM pg_subscription s LEFT JOIN pg_subscription_rel r ON r.srsubid = s.oid WHERE s.subname = ANY($1)`, subs).Scan(&waiting, &present)
		if err != nil {
			return err
		}
		if waiting > 0 || present < len(subs) {
			return nil
		}
	}
	if t.prepared == nil {
		t.prepared = make(chan struct{})
		back := rs.backStream(t, "_b"+strconv.FormatInt(t.id, 10))
		go func() {
			defer close(t.prepared)
			ctx, cancel := context.WithTimeout(context.Background(), prepareTimeout)
			defer cancel()
			if rs.prepareBack(ctx, back) == nil {
				t.back = back
			}
		}()
	}
	select {
	case <-t.prepared:
		t.synced, t.inner = true, "replicating"
	default:
	}
	return nil
}

// prepareTimeout bounds the making of a stream back before the pause; past it, or on any
// error, the CUTOVER makes it itself.
const prepareTimeout = time.Minute

// backStream is the stream back of t, from its destination to its source, its
// publications and slots named after t's with suffix.
func (rs *Resharder) backStream(t *streamTask, suffix string) *streamTask {
	return &streamTask{kind: "replication", status: "running", inner: "replicating", synced: true,
		from: t.to, to: t.from, fromDB: t.fromDB, toDB: t.toDB, pub: t.pub + suffix, slot: t.slot + suffix}
}

// prepareBack makes the stream back b before the pause, while the forward stream still
// applies the source's writes to the destination: its publications and slots on the
// destination shards, its subscriptions on the source shards, disabled. Its slots decode
// from now on, so they would carry back what the forward stream applies from now to the
// CUTOVER, every row of it already on the source: the CUTOVER skips all of it (startBack)
// before it enables the subscriptions. On an error it removes what it made.
func (rs *Resharder) prepareBack(ctx context.Context, b *streamTask) error {
	err := rs.publish(ctx, b)
	if err == nil {
		err = rs.slots(ctx, b)
	}
	if err == nil {
		err = rs.subscribe(ctx, b, false, false, false)
	}
	if err != nil {
		return errors.Join(err, rs.dropBack(context.WithoutCancel(ctx), b))
	}
	return nil
}

// dropBack removes a stream back: its subscriptions (and with them their slots), its
// publications, and its slots where no subscription was made.
func (rs *Resharder) dropBack(ctx context.Context, b *streamTask) error {
	return errors.Join(rs.unstream(ctx, b), rs.dropSlots(ctx, b))
}

// startBack starts the prepared stream back b where the destination's WAL is once the
// forward stream is drained (Cutover calls it after drain). On each destination shard, a
// transaction committed synchronously flushes the WAL up to its commit, so up to every
// commit the forward stream made (its apply runs with synchronous_commit off, as these
// servers do: a commit can be visible before it is flushed), and the flushed position is
// read; on each source shard, the replication origin of each subscription of b (pg_<oid>,
// where an apply worker keeps how far it has applied, and asks its publisher to stream
// from) is set to that position of its publisher, then the subscription is enabled. Its
// walsender skips every transaction that committed before it. No slot is decoded inside
// the pause: the walsender does that once the worker connects, after the CUTOVER.
//
// Why no write is carried twice or lost: everything the destination committed up to that
// position came from the forward stream, and is on the source already (the drain saw the
// barrier of every source shard applied, and nothing commits on the source after its
// barrier: the fence keeps the role off, the paused routers hold their writes, the
// resharder writes only barriers), so skipping it carries nothing twice; everything after
// it is a write the swap lets onto the destination (Cutover swaps only once startBack and
// the forward stream's halt are done), so the stream back carries it. That is where a slot
// made inside the CUTOVER after the drain starts too; and the forward stream is halted
// before the swap, so nothing the stream back applies to the source comes back.
func (rs *Resharder) startBack(ctx context.Context, b *streamTask) error {
	n, m := len(b.to.Shards), len(b.from.Shards)
	token := time.Now().UnixNano()
	at := make([]string, m)
	err := each(m, func(i int) error {
		bk := b.from.Shards[i].Backend
		rows, err := rs.batch(ctx, bk, barrierSQL(b.slot+"_start_"+strconv.Itoa(i), token, true), "SELECT pg_current_wal_flush_lsn()::text")
		if err != nil {
			return err
		}
		if len(rows) != 1 || len(rows[0]) != 1 {
			return fmt.Errorf("refrouter: the flushed WAL position of %s: %d rows", backendName(bk), len(rows))
		}
		at[i] = string(rows[0][0])
		return nil
	})
	if err != nil {
		return err
	}
	return each(n, func(j int) error {
		var sqls []string
		for i := range m {
			sub := b.subName(i, j)
			sqls = append(sqls, "SELECT pg_replication_origin_advance('pg_' || oid, "+literal(at[i])+"::pg_lsn) FROM pg_subscription WHERE subname = "+literal(sub),
				"ALTER SUBSCRIPTION "+pgx.Identifier{sub}.Sanitize()+" ENABLE")
		}
		_, err := rs.batch(ctx, b.to.Shards[j].Backend, sqls...)
		return err
	})
}

// advance moves the slots of the stream back b, on each destination shard, to the
// position its server's WAL is flushed to.
func (rs *Resharder) advance(ctx context.Context, b *streamTask) error {
	n, m := len(b.to.Shards), len(b.from.Shards)
	return each(m, func(i int) error {
		slots := make([]string, n)
		for j := range n {
			slots[j] = literal(b.subName(i, j))
		}
		return rs.exec(ctx, b.from.Shards[i].Backend,
			"SELECT pg_replication_slot_advance(s, pg_current_wal_flush_lsn()) FROM unnest(ARRAY["+strings.Join(slots, ", ")+"]) AS s")
	})
}

// keepBackCurrent advances the slots of the stream back prepared for t while t still
// runs, so that they hold little WAL and the walsender has little to decode when the
// stream back starts. Before the swap everything on the destination came from the
// forward stream, so skipping it is what startBack does too.
func (rs *Resharder) keepBackCurrent(ctx context.Context, t *streamTask) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if t.status != "running" || t.prepared == nil {
		return nil
	}
	select {
	case <-t.prepared:
	default:
		return nil
	}
	if t.back == nil {
		return nil
	}
	return rs.advance(ctx, t.back)
}

// backOf waits for the preparation of t's stream back, if one started, and returns what
// it made (nil: none).
func backOf(t *streamTask) *streamTask {
	if t.prepared == nil {
		return nil
	}
	<-t.prepared
	return t.back
}

// Tasks implements adapters.Resharder: every task, as SHOW TASKS lists root tasks.
func (rs *Resharder) Tasks(ctx context.Context) ([]adapters.Task, error) {
	if err := rs.router.reachable("Tasks"); err != nil {
		return nil, err
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var out []adapters.Task
	for _, t := range rs.tasks {
		if err := rs.refresh(ctx, t); err != nil {
			return nil, rs.fail("Tasks", err)
		}
		out = append(out, adapters.Task{ID: t.id, Kind: t.listedKind(), Status: t.status, InnerStatus: t.inner, Elapsed: time.Since(t.started)})
	}
	return out, nil
}

// SlotLag implements adapters.Resharder: the largest lag in bytes among the slots of the
// task named slot, measured against each source shard's current WAL position; not ok when
// the task reads from another number of shards than the caller expects, or a shard's lag
// is unknown.
func (rs *Resharder) SlotLag(ctx context.Context, slot string, shards int) (int64, bool, error) {
	lags, err := rs.shardLags(ctx, slot)
	if err != nil || len(lags) != shards || shards == 0 {
		return 0, false, err
	}
	var worst int64
	for _, l := range lags {
		if l == nil {
			return 0, false, nil
		}
		worst = max(worst, *l)
	}
	return worst, true, nil
}

// shardLags is the lag of the task named slot on each of its source shards (nil where a
// shard's slots are not all there, or one has never confirmed a position); no task, none.
func (rs *Resharder) shardLags(ctx context.Context, slot string) ([]*int64, error) {
	rs.mu.Lock()
	var t *streamTask
	for _, x := range rs.tasks {
		if x.slot == slot {
			t = x
		}
	}
	rs.mu.Unlock()
	if t == nil {
		return nil, nil
	}
	var out []*int64
	for i, from := range t.from.Shards {
		var slots []string
		for j := range t.to.Shards {
			slots = append(slots, t.subName(i, j))
		}
		p, err := rs.pool(ctx, from.Backend)
		if err != nil {
			return nil, rs.fail("SlotLag", err)
		}
		var lag *int64
		var n int
		err = p.QueryRow(ctx, `SELECT max(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn))::bigint, count(confirmed_flush_lsn)
			FROM pg_replication_slots WHERE slot_name = ANY($1)`, slots).Scan(&lag, &n)
		if err != nil {
			return nil, rs.fail("SlotLag", err)
		}
		if n < len(slots) {
			lag = nil
		}
		out = append(out, lag)
	}
	// At every poll before the pause. Its error is not the poll's: the CUTOVER advances
	// the slots anyway.
	_ = rs.keepBackCurrent(ctx, t)
	return out, nil
}

// barrierSQL inserts the barrier row (origin, token) into syncTable, committed with
// synchronous_commit on when flush is set (the WAL is then flushed up to the commit before it
// returns), else with the server's setting.
func barrierSQL(origin string, token int64, flush bool) string {
	insert := fmt.Sprintf("INSERT INTO %s VALUES (%s, %d)", syncTable, literal(origin), token)
	if !flush {
		return insert
	}
	return "BEGIN; SET LOCAL synchronous_commit = on; " + insert + "; COMMIT"
}

// drainTimeout bounds Cutover's wait for the barrier rows.
const drainTimeout = 30 * time.Second

// drain writes a barrier row on every source shard of t and waits until every destination
// shard has applied all of them: everything committed on a source before its barrier is then
// there, since a subscription applies its publisher's transactions in commit order.
//
// Each barrier commits with synchronous_commit on, whatever the server's setting: a walsender
// decodes only WAL that is flushed, and a commit made with synchronous_commit off is flushed
// by the WAL writer, up to wal_writer_delay (200ms by default) later when nothing else
// writes, which is the case inside the pause. The flush also carries every commit before the
// barrier. BenchmarkBarrierVisible measures both ways in one run.
func (rs *Resharder) drain(ctx context.Context, t *streamTask) error {
	token := time.Now().UnixNano()
	err := each(len(t.from.Shards), func(i int) error {
		return rs.exec(ctx, t.from.Shards[i].Backend, barrierSQL(t.slot+"_"+strconv.Itoa(i), token, true))
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, drainTimeout)
	defer cancel()
	return each(len(t.to.Shards), func(j int) error {
		p, err := rs.pool(ctx, t.to.Shards[j].Backend)
		if err != nil {
			return err
		}
		for {
			var n int
			if err := p.QueryRow(ctx, "SELECT count(*) FROM "+syncTable+" WHERE token = $1", token).Scan(&n); err != nil {
				return fmt.Errorf("refrouter: waiting for the stream to drain into destination shard %d: %w", j, err)
			}
			if n == len(t.from.Shards) {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("refrouter: destination shard %d has %d of %d barrier rows after %v: %w", j, n, len(t.from.Shards), drainTimeout, ctx.Err())
			case <-time.After(2 * time.Millisecond):
			}
		}
	})
}

// Cutover implements adapters.Resharder: drain task's stream, stop it, swap the names in
// the designated router, start the stream the other way as a new task.
func (rs *Resharder) Cutover(ctx context.Context, task int64) error {
	if err := rs.router.reachable("Cutover"); err != nil {
		return err
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var t *streamTask
	for _, x := range rs.tasks {
		if x.id == task {
			t = x
		}
	}
	if t != nil {
		if err := rs.refresh(ctx, t); err != nil {
			return rs.fail("Cutover", err)
		}
	}
	if t == nil || t.status != "running" || t.inner != "replicating" {
		return rs.fail("Cutover", errors.New("task is not a replication task"))
	}
	if err := rs.drain(ctx, t); err != nil {
		t.status = "failed: " + err.Error()
		return rs.fail("Cutover", errors.Join(err, rs.dropPrepared(context.WithoutCancel(ctx), t)))
	}
	// The stream back starts where the drain left the new shards: nothing writes there
	// (the fence keeps the role out, the forward stream has nothing left to apply). Made
	// before the pause, it starts there (startBack); else its publications and slots are
	// made now, before the forward stream is halted.
	rev, prepared := backOf(t), true
	if rev == nil {
		rev, prepared = rs.backStream(t, "_r"+strconv.FormatInt(rs.next, 10)), false
		err := rs.publish(ctx, rev)
		if err == nil {
			err = rs.slots(ctx, rev)
		}
		if err != nil {
			err = errors.Join(err, rs.dropBack(context.WithoutCancel(ctx), rev))
			t.status = "failed: " + err.Error()
			return rs.fail("Cutover", err)
		}
	}
	t.back = nil // from here on rev is the new task's, or dropped
	// The forward stream is halted while the stream back starts: neither carries anything
	// now (the drain is done, the fence keeps the role off both layouts), and the swap,
	// which lets the designated instance write where the stream back reads, comes only
	// once both are done, so nothing the stream back applies to the source is carried
	// forward again. The forward stream's subscriptions, publications and slots are
	// dropped after the swap, outside the pause (dropHalted).
	var drop, start error
	var wg sync.WaitGroup
	wg.Go(func() { drop = rs.halt(ctx, t) })
	wg.Go(func() {
		if prepared {
			start = rs.startBack(ctx, rev)
		} else {
			start = rs.subscribe(ctx, rev, false, false, true)
		}
	})
	wg.Wait()
	if err := errors.Join(drop, start); err != nil {
		t.status = "failed: " + err.Error()
		undo := context.WithoutCancel(ctx)
		return rs.fail("Cutover", errors.Join(err, rs.dropBack(undo, rev), rs.unstream(undo, t)))
	}
	if err := rs.router.Swap(t.fromDB, t.toDB); err != nil {
		t.status = "failed: " + err.Error()
		return err
	}
	// Past the swap: the stream back keeps the old shards current.
	t.status, t.inner = "finished", ""
	rev.started = time.Now()
	rev.id = rs.next
	rs.next++
	rs.tasks = append(rs.tasks, rev)
	rs.cleanups.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := rs.dropHalted(ctx, t); err != nil {
			rs.cleanupMu.Lock()
			rs.cleanupErr = errors.Join(rs.cleanupErr, err)
			rs.cleanupMu.Unlock()
		}
	})
	return nil
}

// cleanupTimeout bounds the drop of a halted stream after its CUTOVER.
const cleanupTimeout = time.Minute

// halt stops t's subscriptions from applying anything more, on the destination shards
// alone (a DROP SUBSCRIPTION would also connect to the publisher to drop the slot, and
// wait for its walsender to let go of it): each is disabled, then its apply worker is
// ended, until none is left. A disabled subscription's worker would stop by itself only
// when it next reads its catalog row (up to a second later); one that attaches after the
// look that found none reads its row after the DISABLE committed, and exits without
// applying anything (a worker reads whether its subscription is enabled when it starts),
// and the launcher starts none for a disabled subscription.
func (rs *Resharder) halt(ctx context.Context, t *streamTask) error {
	n, m := len(t.to.Shards), len(t.from.Shards)
	return each(n, func(j int) error {
		subs := make([]string, m)
		var sqls []string
		for i := range m {
			subs[i] = literal(t.subName(i, j))
			sqls = append(sqls, "ALTER SUBSCRIPTION "+pgx.Identifier{t.subName(i, j)}.Sanitize()+" DISABLE")
		}
		b := t.to.Shards[j].Backend
		if _, err := rs.batch(ctx, b, sqls...); err != nil {
			return err
		}
		return rs.untilNone(ctx, b, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_subscription WHERE pid IS NOT NULL AND subname = ANY(ARRAY["+
			strings.Join(subs, ", ")+"])", 2*time.Millisecond)
	})
}

// untilNone runs the counting query q on shard database b every d until it counts none.
func (rs *Resharder) untilNone(ctx context.Context, b shardmap.Backend, q string, d time.Duration) error {
	p, err := rs.pool(ctx, b)
	if err != nil {
		return err
	}
	for {
		var n int
		if err := p.QueryRow(ctx, q).Scan(&n); err != nil {
			return fmt.Errorf("refrouter: on %s: %s: %w", backendName(b), q, err)
		}
		if n == 0 {
			return nil
		}
		if err := sleepCtx(ctx, d); err != nil {
			return fmt.Errorf("refrouter: on %s, %d left: %s: %w", backendName(b), n, q, err)
		}
	}
}

// dropHalted drops what halt left of t: its subscriptions, without their slots (their
// slot_name set to NONE, so the drop is local), its publications, then its slots on the
// source shards, each once its walsender has let go of it.
func (rs *Resharder) dropHalted(ctx context.Context, t *streamTask) error {
	n, m := len(t.to.Shards), len(t.from.Shards)
	err := each(n, func(j int) error {
		var sqls []string
		for i := range m {
			sub := pgx.Identifier{t.subName(i, j)}.Sanitize()
			sqls = append(sqls, "ALTER SUBSCRIPTION "+sub+" SET (slot_name = NONE)", "DROP SUBSCRIPTION "+sub)
		}
		return rs.exec(ctx, t.to.Shards[j].Backend, sqls...)
	})
	if err != nil {
		return err
	}
	return each(m, func(i int) error {
		slots := make([]string, n)
		sqls := make([]string, n)
		for j := range n {
			slots[j] = literal(t.subName(i, j))
			sqls[j] = "DROP PUBLICATION IF EXISTS " + pgx.Identifier{t.pubName(j)}.Sanitize()
		}
		b := t.from.Shards[i].Backend
		if err := rs.exec(ctx, b, sqls...); err != nil {
			return err
		}
		in := "slot_name = ANY(ARRAY[" + strings.Join(slots, ", ") + "])"
		if err := rs.untilNone(ctx, b, "SELECT count(*) FROM pg_replication_slots WHERE active_pid IS NOT NULL AND "+in, 5*time.Millisecond); err != nil {
			return err
		}
		// Nothing subscribes any more: no walsender takes them again.
		return rs.exec(ctx, b, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE "+in)
	})
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// StopTask implements adapters.Resharder: a task that is not running is not an error.
func (rs *Resharder) StopTask(ctx context.Context, task int64) error {
	if err := rs.router.reachable("StopTask"); err != nil {
		return err
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, t := range rs.tasks {
		if t.id == task && t.status == "running" {
			if err := rs.stop(ctx, t); err != nil {
				return rs.fail("StopTask", err)
			}
			t.status, t.inner = "cancelled", ""
		}
	}
	return nil
}

// stop drops a running task's stream and the stream back prepared for it.
func (rs *Resharder) stop(ctx context.Context, t *streamTask) error {
	return errors.Join(rs.unstream(ctx, t), rs.dropPrepared(ctx, t))
}

// dropPrepared drops the stream back prepared for t, if any (once its preparation ended).
func (rs *Resharder) dropPrepared(ctx context.Context, t *streamTask) error {
	b := backOf(t)
	if b == nil {
		return nil
	}
	t.back = nil
	return rs.dropBack(ctx, b)
}

// Close stops every running task; call it when done with the resharder.
func (rs *Resharder) Close(ctx context.Context) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var errs []error
	for _, t := range rs.tasks {
		if t.status == "running" {
			errs = append(errs, rs.unstream(ctx, t))
			t.status = "cancelled"
		}
		errs = append(errs, rs.dropPrepared(ctx, t))
	}
	rs.cleanups.Wait()
	rs.cleanupMu.Lock()
	errs = append(errs, rs.cleanupErr)
	rs.cleanupMu.Unlock()
	rs.poolMu.Lock()
	for _, p := range rs.pools {
		p.Close()
	}
	rs.pools = nil
	rs.poolMu.Unlock()
	return errors.Join(errs...)
}
