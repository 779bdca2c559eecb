package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/postgres"
	"loam.dev/router/conformance"
	"loam.dev/router/conformance/pgtest"
	"loam.dev/router/kernel/shardmap"
)

// TestRealBackend runs the ShardBackend contract on a real Postgres primary and standby, then
// shows each case catching a backend with one deliberate bug, then checks what the contract
// leaves to this implementation. One primary and one standby serve every subtest.
func TestRealBackend(t *testing.T) {
	s := pg.Get(t)
	sb := s.StartStandby(t, serverSettings...)

	t.Run("suite", func(t *testing.T) {
		conformance.RunBackendSuite(t, harness(s, sb, ""))
	})

	t.Run("mutants", func(t *testing.T) {
		// Something prepared in another database, for the mutant that lists every database's.
		other, r := newEnvDB(t, s)
		conn, err := pgx.Connect(t.Context(), dsnAs(s, other, r.app))
		require.NoError(t, err)
		_, err = conn.Exec(t.Context(), "BEGIN; INSERT INTO items VALUES (1, 'x'); PREPARE TRANSACTION 'elsewhere'; ", pgx.QueryExecModeSimpleProtocol)
		require.NoError(t, err)
		conn.Close(t.Context())

		mustCatch := map[string][]string{
			"fence-skips-terminate":   {"FenceEndsOpenSessions", "FenceEndsMemberSessions"},
			"fence-skips-nologin":     {"FenceRefusesNewLogin"},
			"fence-skips-members":     {"FenceEndsMemberSessions"},
			"fence-ends-all-sessions": {"FenceSparesOtherRoles"},
			"unfence-noop":            {"FenceIsIdempotent", "UnfenceRestores"},
			"status-says-standby":     {"StatusPrimary"},
			"prepared-all-databases":  {"PreparedEmpty", "PreparedListsGIDs"},
			"checksum-ordered":        {"ChecksumEqualForEqualData"},
			"checksum-xor":            {"ChecksumDiffersForChangedRow"},
			"checksum-signed-modulo":  {"ChecksumSelectsShardRows"},
		}
		// A cut-short call is not a contract case: TestRealFenceCutShortSettles shows it.
		caughtElsewhere := map[string]string{"no-settle": "TestRealFenceCutShortSettles"}
		require.Len(t, mustCatch, len(postgres.Mutations)-len(caughtElsewhere), "every mutation has cases that must catch it")
		cases := conformance.BackendCases()
		for _, mutant := range slices.Sorted(maps.Keys(mustCatch)) {
			t.Run(mutant, func(t *testing.T) {
				h := harness(s, nil, mutant)
				for _, name := range mustCatch[mutant] {
					i := slices.IndexFunc(cases, func(c conformance.BackendCase) bool { return c.Name == name })
					require.GreaterOrEqual(t, i, 0, "no case %s", name)
					out := conformance.Record(t.Context(), name, func(tb conformance.TB) { cases[i].Run(tb, h) })
					require.True(t, out.Failed, "mutant %s was not caught by %s", mutant, name)
					t.Logf("%s caught by %s: %s", mutant, name, firstLine(out.Msgs))
				}
			})
		}
	})

	t.Run("standby lag", func(t *testing.T) { testLag(t, s) })
	t.Run("fence", func(t *testing.T) { testFence(t, s) })
	t.Run("checksum matches Postgres partitioning", func(t *testing.T) { testChecksumPartitions(t, s) })
	t.Run("errors", func(t *testing.T) { testErrors(t, s) })
}

func firstLine(msgs []string) string {
	if len(msgs) == 0 {
		return "(no message)"
	}
	m := strings.TrimSpace(msgs[0])
	if i := strings.Index(m, "Error:"); i >= 0 {
		m = strings.TrimSpace(m[i+len("Error:"):])
	}
	if i := strings.IndexByte(m, '\n'); i >= 0 {
		m = m[:i]
	}
	return m
}

// testLag: a standby that replays late reports the age of what it has not replayed, and no
// lag once it has replayed everything it received.
func testLag(t *testing.T, s *pgtest.Server) {
	ctx := t.Context()
	delayed := s.StartStandby(t, append(serverSettings, pgtest.WithSetting("recovery_min_apply_delay", "1500ms"))...)
	b, err := postgres.Open(ctx, delayed.DSN("postgres"), postgres.Options{})
	require.NoError(t, err)
	defer b.Close()
	// Lag is the age of the last replayed transaction: let one be replayed first.
	adminExec(t, s, "postgres", "CREATE TABLE IF NOT EXISTS lag_probe (x int); INSERT INTO lag_probe VALUES (1)")
	delayed.WaitCaughtUp(t, 15*time.Second)
	adminExec(t, s, "postgres", "INSERT INTO lag_probe VALUES (2)")
	var seen adapters.BackendStatus
	require.Eventually(t, func() bool {
		seen, err = b.Status(ctx)
		require.NoError(t, err)
		return seen.Lag >= 300*time.Millisecond
	}, 10*time.Second, 20*time.Millisecond, "a standby 1.5s behind must report lag")
	require.Equal(t, adapters.RoleStandby, seen.Role)
	require.NotEqual(t, seen.Position, seen.Replayed, "received but not yet replayed")
	require.Eventually(t, func() bool {
		seen, err = b.Status(ctx)
		require.NoError(t, err)
		return seen.Lag == 0 && seen.Position == seen.Replayed
	}, 15*time.Second, 20*time.Millisecond, "once everything received is replayed there is no lag")
}

// testFence checks the fence beyond the contract: several fences sharing a member, roles that
// were NOLOGIN before, memberships revoked while fenced, sessions in other databases and
// running statements, the administrator's own role, and least privilege.
func testFence(t *testing.T, s *pgtest.Server) {
	ctx := t.Context()
	open := func(t *testing.T, db, user string) *postgres.Backend {
		b, err := postgres.Open(ctx, dsnAs(s, db, user), postgres.Options{})
		require.NoError(t, err)
		t.Cleanup(b.Close)
		return b
	}
	canLogin := func(t *testing.T, role string) bool {
		t.Helper()
		return s.QueryString(t, "postgres", "SELECT rolcanlogin::text FROM pg_roles WHERE rolname = $1", role) == "true"
	}
	marker := func(t *testing.T, role string) string {
		t.Helper()
		return s.QueryString(t, "postgres", `SELECT coalesce((SELECT c FROM pg_db_role_setting s, unnest(s.setconfig) c
			WHERE s.setrole = (SELECT oid FROM pg_roles WHERE rolname = $1) AND s.setdatabase = 0), '')`, role)
	}

	t.Run("two fences share a member", func(t *testing.T) {
		adminExec(t, s, "postgres", "CREATE ROLE sh_a LOGIN; CREATE ROLE sh_b LOGIN; CREATE ROLE sh_m LOGIN; GRANT sh_a TO sh_m; GRANT sh_b TO sh_m")
		b := open(t, "postgres", "postgres")
		require.NoError(t, b.FenceWrites(ctx, "sh_a"))
		require.NoError(t, b.FenceWrites(ctx, "sh_b"))
		require.Equal(t, `loam.fenced_by=["sh_a","sh_b"]`, marker(t, "sh_m"))
		require.NoError(t, b.UnfenceWrites(ctx, "sh_a"))
		require.True(t, canLogin(t, "sh_a"))
		require.False(t, canLogin(t, "sh_m"), "sh_b's fence still stands, so its member stays locked out")
		require.NoError(t, b.UnfenceWrites(ctx, "sh_b"))
		require.True(t, canLogin(t, "sh_m"))
		require.Empty(t, marker(t, "sh_m"), "the marker goes once no fence holds the login")
	})

	t.Run("roles NOLOGIN before the fence stay so", func(t *testing.T) {
		adminExec(t, s, "postgres", "CREATE ROLE nl_app NOLOGIN; CREATE ROLE nl_grp NOLOGIN; CREATE ROLE nl_locked NOLOGIN; CREATE ROLE nl_m LOGIN; "+
			"GRANT nl_app TO nl_grp; GRANT nl_grp TO nl_m; GRANT nl_app TO nl_locked")
		b := open(t, "postgres", "postgres")
		require.NoError(t, b.FenceWrites(ctx, "nl_app"))
		require.False(t, canLogin(t, "nl_m"), "a member through a group role is a member")
		require.NoError(t, b.UnfenceWrites(ctx, "nl_app"))
		require.True(t, canLogin(t, "nl_m"))
		for _, r := range []string{"nl_app", "nl_grp", "nl_locked"} {
			require.False(t, canLogin(t, r), "%s was NOLOGIN before the fence; unfence must not let it log in", r)
		}
	})

	t.Run("membership revoked while fenced", func(t *testing.T) {
		adminExec(t, s, "postgres", "CREATE ROLE rv_app LOGIN; CREATE ROLE rv_m LOGIN; GRANT rv_app TO rv_m")
		b := open(t, "postgres", "postgres")
		require.NoError(t, b.FenceWrites(ctx, "rv_app"))
		adminExec(t, s, "postgres", "REVOKE rv_app FROM rv_m")
		require.NoError(t, b.UnfenceWrites(ctx, "rv_app"))
		require.True(t, canLogin(t, "rv_m"), "the login the fence took comes back even if the membership went")
	})

	t.Run("sessions in other databases and running statements end", func(t *testing.T) {
		db, r := newEnvDB(t, s)
		b := open(t, db, "postgres")
		other, err := pgx.Connect(ctx, dsnAs(s, "postgres", r.app))
		require.NoError(t, err)
		defer other.Close(context.Background())
		busy, err := pgx.Connect(ctx, dsnAs(s, db, r.app))
		require.NoError(t, err)
		defer busy.Close(context.Background())
		sleeping := make(chan error, 1)
		go func() { _, err := busy.Exec(ctx, "SELECT pg_sleep(30)"); sleeping <- err }()
		require.Eventually(t, func() bool {
			return s.QueryString(t, "postgres", "SELECT count(*)::text FROM pg_stat_activity WHERE usename = $1 AND state = 'active'", r.app) == "1"
		}, 5*time.Second, 10*time.Millisecond)
		t0 := time.Now()
		require.NoError(t, b.FenceWrites(ctx, r.app))
		select {
		case err := <-sleeping:
			require.ErrorIs(t, postgres.Classify("x", "Exec", err), adapters.ErrFenced)
			require.Equal(t, postgres.CodeTerminated, postgres.Code(err))
			require.Less(t, time.Since(t0), 10*time.Second, "a running statement ends at once")
		case <-time.After(10 * time.Second):
			t.Fatal("pg_sleep(30) kept running through the fence")
		}
		_, err = other.Exec(ctx, "SELECT 1")
		require.Equal(t, postgres.CodeTerminated, postgres.Code(err), "a session of the role in another database ends too")
		require.Equal(t, "0", s.QueryString(t, "postgres", "SELECT count(*)::text FROM pg_stat_activity WHERE usename = $1", r.app))
	})

	t.Run("refuses to fence its own role", func(t *testing.T) {
		adminExec(t, s, "postgres", "CREATE ROLE own_app LOGIN; CREATE ROLE own_ctl LOGIN CREATEROLE; GRANT own_app TO own_ctl; GRANT pg_signal_backend TO own_ctl")
		b := open(t, "postgres", "own_ctl")
		err := b.FenceWrites(ctx, "own_app")
		require.ErrorContains(t, err, `connects as "own_ctl"`)
		require.True(t, canLogin(t, "own_app"), "a refused fence changes nothing")
		require.True(t, canLogin(t, "own_ctl"))
	})

	t.Run("least privilege", func(t *testing.T) {
		// The documented non-superuser administrator: CREATEROLE, pg_signal_backend and SET on
		// the marker parameter.
		db, r := newEnvDB(t, s)
		adminExec(t, s, "postgres", "CREATE ROLE lp_ctl LOGIN CREATEROLE; GRANT pg_signal_backend TO lp_ctl")
		b := open(t, db, "lp_ctl")
		err := b.FenceWrites(ctx, r.app)
		var be *adapters.BackendError
		require.ErrorAs(t, err, &be)
		require.Equal(t, "42501", be.Code, "without SET on %s the fence is refused: %v", postgres.FenceMarker, err)
		require.True(t, canLogin(t, r.app), "the refused fence rolled back its NOLOGIN with the marker")
		adminExec(t, s, "postgres", "GRANT SET ON PARAMETER loam.fenced_by TO lp_ctl")
		sess, err := pgx.Connect(ctx, dsnAs(s, db, r.member))
		require.NoError(t, err)
		defer sess.Close(context.Background())
		require.NoError(t, b.FenceWrites(ctx, r.app))
		_, err = sess.Exec(ctx, "SELECT 1")
		require.Equal(t, postgres.CodeTerminated, postgres.Code(err), "%v", err)
		require.NoError(t, b.UnfenceWrites(ctx, r.app))
		require.True(t, canLogin(t, r.app))
		require.True(t, canLogin(t, r.member))
	})

	t.Run("cancelled context", func(t *testing.T) {
		_, r := newEnvDB(t, s)
		b := open(t, "postgres", "postgres")
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		require.ErrorIs(t, b.FenceWrites(cctx, r.app), context.Canceled)
		require.True(t, canLogin(t, r.app))
		_, err := b.Status(cctx)
		require.ErrorIs(t, err, context.Canceled)
		_, err = b.Prepared(cctx)
		require.ErrorIs(t, err, context.Canceled)
		_, err = b.Checksum(cctx, "pg_class", adapters.ShardFn{})
		require.ErrorIs(t, err, context.Canceled)
	})
}

// testChecksumPartitions compares Checksum's shard selection, done in Go with kernel/pghash,
// with where Postgres's own hash partitioning puts the same rows, for every key type a
// record can name; and range and list schemes with the same rows selected in SQL.
func testChecksumPartitions(t *testing.T, s *pgtest.Server) {
	ctx := t.Context()
	db, _ := newEnvDB(t, s)
	b, err := postgres.Open(ctx, s.DSN(db), postgres.Options{})
	require.NoError(t, err)
	defer b.Close()
	types := map[shardmap.KeyType]string{
		shardmap.Bigint:  "int8",
		shardmap.Integer: "int4",
		shardmap.Text:    "text",
		shardmap.UUID:    "uuid",
	}
	gen := map[string]string{
		"int8": "(g * 2654435761 - 5000000000)::int8",
		"int4": "(g * 40503 - 2000000)::int4",
		"text": "CASE WHEN g % 17 = 0 THEN '' ELSE md5(g::text) || 'é' END",
		"uuid": "md5(g::text)::uuid",
	}
	for kt, typ := range types {
		for _, n := range []uint32{2, 3, 5} {
			table := fmt.Sprintf("part_%s_%d", typ, n)
			adminExec(t, s, db, fmt.Sprintf("CREATE TABLE %s (k %s, v text) PARTITION BY HASH (k)", table, typ))
			for r := range n {
				adminExec(t, s, db, fmt.Sprintf("CREATE TABLE %s_%d PARTITION OF %s FOR VALUES WITH (MODULUS %d, REMAINDER %d)", table, r, table, n, r))
			}
			adminExec(t, s, db, fmt.Sprintf("INSERT INTO %s SELECT CASE WHEN g = 7 THEN NULL ELSE %s END, g::text FROM generate_series(1, 600) g", table, gen[typ]))
			scheme := shardmap.PgHash{Key: shardmap.Key{Column: "k", Type: kt}, Shards: n}
			var total uint64
			for r := range n {
				want, err := b.Checksum(ctx, fmt.Sprintf("%s_%d", table, r), adapters.ShardFn{})
				require.NoError(t, err)
				got, err := b.Checksum(ctx, table, adapters.ShardFn{Scheme: scheme, Shard: r})
				require.NoError(t, err)
				require.Equal(t, want.Rows, got.Rows, "%s shard %d: rows", table, r)
				require.Equal(t, want.Sum, got.Sum, "%s shard %d: Go's routing and Postgres's partition disagree", table, r)
				total += got.Rows
			}
			require.EqualValues(t, 600, total)
		}
	}

	// Ranges and lists, against the same rows selected by SQL.
	adminExec(t, s, db, "CREATE TABLE rl (k int8, region text, v text); INSERT INTO rl SELECT g, (ARRAY['eu','us','ap','sa'])[1 + ((g % 4) + 4) % 4], md5(g::text) FROM generate_series(-50, 149) g")
	val := func(i int64) *shardmap.Value { v := shardmap.Int(i); return &v }
	def := uint32(2)
	ranges := shardmap.PgRange{Key: shardmap.Key{Column: "k", Type: shardmap.Bigint}, Ranges: []shardmap.RangeRule{
		{End: val(0), Shard: 0}, {Start: val(0), End: val(100), Shard: 1}, {Start: val(100), Shard: 2}}}
	lists := shardmap.PgList{Key: shardmap.Key{Column: "region", Type: shardmap.Text}, Lists: []shardmap.ListRule{
		{Values: []shardmap.Value{shardmap.Str("eu")}, Shard: 0}, {Values: []shardmap.Value{shardmap.Str("us"), shardmap.Str("ap")}, Shard: 1}}, Default: &def}
	for name, c := range map[string]struct {
		scheme shardmap.Scheme
		where  []string
	}{
		"range": {ranges, []string{"k < 0", "k >= 0 AND k < 100", "k >= 100"}},
		"list":  {lists, []string{"region = 'eu'", "region IN ('us', 'ap')", "region NOT IN ('eu', 'us', 'ap')"}},
	} {
		for shard, where := range c.where {
			table := fmt.Sprintf("rl_%s_%d", name, shard)
			adminExec(t, s, db, fmt.Sprintf("CREATE TABLE %s AS SELECT * FROM rl WHERE %s", table, where))
			want, err := b.Checksum(ctx, table, adapters.ShardFn{})
			require.NoError(t, err)
			require.NotZero(t, want.Rows)
			got, err := b.Checksum(ctx, "rl", adapters.ShardFn{Scheme: c.scheme, Shard: uint32(shard)})
			require.NoError(t, err)
			require.Equal(t, want, adapters.TableDigest{Table: table, Rows: got.Rows, Sum: got.Sum}, "%s shard %d (%s)", name, shard, where)
		}
	}
	adminExec(t, s, db, "INSERT INTO rl VALUES (1000, NULL, 'no region')")
	_, err = b.Checksum(ctx, "rl", adapters.ShardFn{Scheme: lists, Shard: 0})
	require.ErrorContains(t, err, "no single shard", "a NULL list key routes nowhere: refused, not guessed")
	_, err = b.Checksum(ctx, "rl", adapters.ShardFn{Scheme: lists, Shard: 3})
	require.ErrorContains(t, err, "has 3 shards")

	_, err = b.Checksum(ctx, "part_int8_2", adapters.ShardFn{Scheme: shardmap.PgHash{Key: shardmap.Key{Column: "k", Type: shardmap.Bigint, Tables: []string{"other"}}, Shards: 2}})
	require.ErrorContains(t, err, "not among the scheme's sharded tables")
	_, err = b.Checksum(ctx, "public.part_int8_2", adapters.ShardFn{Scheme: shardmap.PgHash{Key: shardmap.Key{Column: "k", Type: shardmap.Bigint, Tables: []string{"part_int8_2"}}, Shards: 2}})
	require.NoError(t, err, "schema-qualified names work, and Tables names the table without its schema")
	_, err = b.Checksum(ctx, "a.b.c", adapters.ShardFn{})
	require.ErrorContains(t, err, "schema.name")
	_, err = b.Checksum(ctx, "part_text_2", adapters.ShardFn{Scheme: shardmap.PgHash{Key: shardmap.Key{Column: "k", Type: shardmap.Bigint}, Shards: 2}})
	require.ErrorContains(t, err, "key k", "text keys read under a bigint key type are refused, not routed by a guess")
}

// testErrors checks the classification of errors a real server sends.
func testErrors(t *testing.T, s *pgtest.Server) {
	ctx := t.Context()
	_, r := newEnvDB(t, s)
	adminExec(t, s, "postgres", "ALTER ROLE "+r.app+" NOLOGIN")
	_, err := pgx.Connect(ctx, dsnAs(s, "postgres", r.app))
	require.True(t, postgres.IsFenceError(err), "%v", err)
	be := new(adapters.BackendError)
	require.ErrorAs(t, postgres.Classify("x", "Login", err), &be)
	require.Equal(t, "28000", be.Code)
	require.True(t, be.Fenced)

	_, err = pgx.Connect(ctx, dsnAs(s, "postgres", "no_such_role_at_all"))
	require.Equal(t, "28000", postgres.Code(err), "%v", err)
	require.False(t, postgres.IsFenceError(err), "a role that does not exist is not a fence: %v", err)
	require.False(t, errors.Is(postgres.Classify("x", "Login", err), adapters.ErrFenced))

	_, err = postgres.Open(ctx, "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2", postgres.Options{})
	require.ErrorContains(t, err, "127.0.0.1:1", "an unreachable server is named")
	require.False(t, errors.Is(err, adapters.ErrFenced))
}
