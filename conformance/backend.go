package conformance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/kernel/pghash"
	"loam.dev/router/kernel/shardmap"
)

// BackendRow is a row of the backend suite's tables, which all have the columns
// (id bigint, v text) in that order.
type BackendRow struct {
	ID int64
	V  string
}

// AppSession is one application session on the backend, logged in as a role: what a router
// holds open to a shard. Its errors are what the application sees, classified the way a
// router classifies them (for Postgres, postgres.Classify), so a fence refusal satisfies
// errors.Is(err, adapters.ErrFenced) and carries the backend's code in an
// *adapters.BackendError.
type AppSession interface {
	// Insert inserts one row into the env's Table: committed at once outside a
	// transaction, part of it after Begin.
	Insert(ctx context.Context, r BackendRow) error
	// Begin opens a transaction; Commit commits it.
	Begin(ctx context.Context) error
	Commit(ctx context.Context) error
	// Close ends the session; closing a session the backend has ended is fine.
	Close()
}

// BackendEnv is one fresh backend, a primary, with the hooks the cases drive it by. The hooks
// other than Login act as an administrator the fence never applies to.
type BackendEnv struct {
	Backend adapters.ShardBackend
	// Role is the application role the fence cases fence. It can log in and insert into
	// Table.
	Role string
	// Member is a role that logs in as itself and, being a member of Role, acts as Role
	// (for Postgres: SET ROLE right after login, so the session shows under Member's name).
	// "" when the implementation has no role membership (BackendHarness.Members false).
	Member string
	// Other is a login role that is not Role and not a member of it: the fence must leave it
	// alone, as it must leave the replication role a reverse stream uses.
	Other string
	// Table is an empty table (id bigint, v text) that Role, Member and Other may insert into.
	Table string
	// Login opens a new session as role.
	Login func(ctx context.Context, role string) (AppSession, error)
	// Load creates table (id bigint, v text) if it does not exist and inserts rows in the
	// order given, which is the order a sequential scan returns them.
	Load func(ctx context.Context, table string, rows []BackendRow) error
	// Rows returns every committed row of table, ordered by id then v.
	Rows func(ctx context.Context, table string) ([]BackendRow, error)
	// Prepare runs, as Role, a transaction inserting r into Table and prepares it as gid
	// (Postgres: PREPARE TRANSACTION; MySQL: an XA branch with gtrid gid), leaving it
	// prepared and detached from any session.
	Prepare func(ctx context.Context, gid string, r BackendRow) error
	// Now reads the clock the backend stamps prepared transactions with.
	Now func() time.Time
}

// BackendHarness opens backends for the backend suite.
type BackendHarness struct {
	// Open returns a new backend with its own roles, tables and prepared transactions, so
	// cases do not see each other's. The harness cleans up in t.Cleanup.
	Open func(t TB) *BackendEnv
	// OpenStandby returns a backend that is a streaming standby; nil when the implementation
	// has none, and the standby case is then left out.
	OpenStandby func(t TB) adapters.ShardBackend
	// Members says that Open's envs have a Member role; without it the member case is left
	// out.
	Members bool
	// Lacks names what this backend does not have that some cases need (a BackendCase's
	// Needs), each with the reason, which RunBackendSuite logs for the cases it leaves out.
	// It declares a difference of the backend's semantics; it is not a way to skip a case
	// the backend fails.
	Lacks map[string]string
	// Codes are the backend's codes for what the cases provoke; nil means PostgresCodes.
	Codes *BackendCodes
	// ComparePositions orders two positions Status reported on one server (negative, zero,
	// positive) and fails on a position it cannot read or two it cannot order (a GTID set
	// that lost transactions); nil means Postgres LSNs.
	ComparePositions func(a, b string) (int, error)
	// Scheme is the shard function ChecksumSelectsShardRows routes the bigint column id by,
	// over n shards; nil means pg_hash (PgDog's). A Vitess backend gives a vindex scheme.
	Scheme func(n uint32) shardmap.Scheme
}

// BackendCodes are the codes, as adapters.BackendError.Code carries them, of what the backend
// cases provoke.
type BackendCodes struct {
	// LoginRefused is a new login of a fenced role.
	LoginRefused string
	// SessionEnded is a statement on a session the fence ended; "" where the backend ends
	// the session without sending a code (MySQL closes the connection).
	SessionEnded string
	// UndefinedTable is a table that does not exist.
	UndefinedTable string
}

// PostgresCodes are Postgres's SQLSTATEs: 28000 for a NOLOGIN role, 57P01 for a terminated
// session, 42P01 for a missing relation.
var PostgresCodes = BackendCodes{LoginRefused: "28000", SessionEnded: "57P01", UndefinedTable: "42P01"}

func (h BackendHarness) codes() BackendCodes {
	if h.Codes == nil {
		return PostgresCodes
	}
	return *h.Codes
}

// comparePositions orders two Status positions; checkPosition only reads one.
func (h BackendHarness) comparePositions(a, b string) (int, error) {
	if h.ComparePositions != nil {
		return h.ComparePositions(a, b)
	}
	x, err := parseLSN(a)
	if err != nil {
		return 0, err
	}
	y, err := parseLSN(b)
	if err != nil {
		return 0, err
	}
	switch {
	case x < y:
		return -1, nil
	case x > y:
		return 1, nil
	}
	return 0, nil
}

func (h BackendHarness) checkPosition(p string) error {
	c, err := h.comparePositions(p, p)
	if err == nil && c != 0 {
		err = fmt.Errorf("position %q does not equal itself", p)
	}
	return err
}

func (h BackendHarness) scheme(n uint32) shardmap.Scheme {
	if h.Scheme == nil {
		return shardmap.PgHash{Key: shardmap.Key{Column: "id", Type: shardmap.Bigint}, Shards: n}
	}
	return h.Scheme(n)
}

// BackendCase is one contract case of a ShardBackend.
type BackendCase struct {
	Name string
	// Needs says what the case needs beyond a primary: "member" (BackendEnv.Member),
	// "standby" (BackendHarness.OpenStandby) or "prepared-metadata" (the owner, database and
	// time of a prepared transaction); "" for nothing.
	Needs string
	Run   func(t TB, h BackendHarness)
}

// Applies reports whether h can run c.
func (c BackendCase) Applies(h BackendHarness) bool {
	if _, lacks := h.Lacks[c.Needs]; lacks && c.Needs != "" {
		return false
	}
	switch c.Needs {
	case "standby":
		return h.OpenStandby != nil
	case "member":
		return h.Members
	}
	return true
}

// RunBackendSuite runs every backend case h can run as a subtest (all of BackendCases when
// cases is empty), saying in the log which ones it left out.
func RunBackendSuite(t *testing.T, h BackendHarness, cases ...BackendCase) {
	if len(cases) == 0 {
		cases = BackendCases()
	}
	for _, c := range cases {
		if !c.Applies(h) {
			if why, ok := h.Lacks[c.Needs]; ok {
				t.Logf("backend suite: case %s left out: the backend has no %s (%s)", c.Name, c.Needs, why)
			} else {
				t.Logf("backend suite: case %s left out (the harness has no %s)", c.Name, c.Needs)
			}
			continue
		}
		t.Run(c.Name, func(t *testing.T) { c.Run(t, h) })
	}
}

// backendWait bounds every wait of the suite (a position advancing, a fence taking effect).
const backendWait = 5 * time.Second

// requireFenced checks that err is the fence refusing, with the backend's own code.
func requireFenced(t TB, err error, code, what string) {
	t.Helper()
	require.Error(t, err, "%s must fail once the role is fenced", what)
	require.ErrorIs(t, err, adapters.ErrFenced, "%s: the error must be recognisable as the fence: %v", what, err)
	var be *adapters.BackendError
	require.ErrorAs(t, err, &be, "%s: the error must keep the backend's code", what)
	require.Equal(t, code, be.Code, "%s: wrong code in %v", what, err)
}

// login opens a session that must succeed and closes it when the case ends.
func login(t TB, env *BackendEnv, role string) AppSession {
	t.Helper()
	s, err := env.Login(t.Context(), role)
	require.NoError(t, err, "login as %q", role)
	t.Cleanup(s.Close)
	return s
}

func rowsOf(t TB, env *BackendEnv, table string) []BackendRow {
	t.Helper()
	rows, err := env.Rows(t.Context(), table)
	require.NoError(t, err, "reading table %q", table)
	return rows
}

func ids(rows []BackendRow) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// parseLSN reads a Postgres LSN ("16/B374D848"): two hexadecimal halves. Backends whose
// positions are not LSNs (MySQL GTID sets) give BackendHarness.ComparePositions.
func parseLSN(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("position %q is not an LSN (hi/lo in hexadecimal)", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("position %q: %w", s, err)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("position %q: %w", s, err)
	}
	return h<<32 | l, nil
}

// ChecksumRows is the data of the checksum cases: keys spread over the whole int8 range,
// including the values whose int8 hash folds to another's (4294967296 hashes like 1) and
// both extremes.
func ChecksumRows() []BackendRow {
	keys := []int64{0, 1, -1, 2, 4294967296, -4294967296, 1 << 62, -(1 << 62), 9223372036854775807, -9223372036854775808}
	for i := int64(1); len(keys) < 160; i++ {
		keys = append(keys, i*7919*104729-int64(len(keys))*1_000_003)
	}
	rows := make([]BackendRow, len(keys))
	for i, k := range keys {
		rows[i] = BackendRow{ID: k, V: "v" + strconv.Itoa(i%13)}
	}
	return rows
}

// PgDogGIDs are gids of the shape PgDog gives its prepared transactions
// (__pgdog_2pc_[<DEPLOYMENT_ID>_]<instance>_<random>_<shard>) and one an application chose.
var PgDogGIDs = []string{
	"__pgdog_2pc_node-1_11831846541046318210_0",
	"__pgdog_2pc_prod-app_1a2b3c4d_42_1",
	"app own 'gid'",
}

// BackendCases returns the ShardBackend contract.
func BackendCases() []BackendCase {
	return []BackendCase{
		{"StatusPrimary", "", func(t TB, h BackendHarness) {
			env := h.Open(t)
			ctx := t.Context()
			st, err := env.Backend.Status(ctx)
			require.NoError(t, err)
			require.Equal(t, adapters.RolePrimary, st.Role, "a primary must report itself as one")
			require.False(t, st.ReadOnly, "a primary that accepts writes is not read-only")
			require.Zero(t, st.Lag, "a primary has no replay lag")
			require.Empty(t, st.Replayed, "a primary replays nothing")
			before := st.Position
			require.NoError(t, h.checkPosition(before))
			s := login(t, env, env.Role)
			for i := range int64(20) {
				require.NoError(t, s.Insert(ctx, BackendRow{ID: i, V: "advance"}))
			}
			deadline := time.Now().Add(backendWait)
			for {
				st, err = env.Backend.Status(ctx)
				require.NoError(t, err)
				c, err := h.comparePositions(st.Position, before)
				require.NoError(t, err)
				require.GreaterOrEqual(t, c, 0, "the write position went backwards from %s to %s", before, st.Position)
				if c > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the write position stayed at %s for %v after 20 committed writes", st.Position, backendWait)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}},
		{"StatusStandby", "standby", func(t TB, h BackendHarness) {
			b := h.OpenStandby(t)
			st, err := b.Status(t.Context())
			require.NoError(t, err)
			require.Equal(t, adapters.RoleStandby, st.Role, "a standby must report itself as one")
			require.True(t, st.ReadOnly, "a standby is read-only")
			require.GreaterOrEqual(t, st.Lag, time.Duration(0))
			require.NoError(t, h.checkPosition(st.Replayed), "a standby reports its replay position")
			c, err := h.comparePositions(st.Position, st.Replayed)
			require.NoError(t, err)
			require.GreaterOrEqual(t, c, 0, "a standby cannot have replayed more (%s) than it received (%s)", st.Replayed, st.Position)
		}},
		{"FenceRefusesNewLogin", "", func(t TB, h BackendHarness) {
			env := h.Open(t)
			ctx := t.Context()
			require.NoError(t, login(t, env, env.Role).Insert(ctx, BackendRow{ID: 1, V: "before"}), "the role writes before the fence")
			require.NoError(t, env.Backend.FenceWrites(ctx, env.Role))
			s, err := env.Login(ctx, env.Role)
			if err == nil {
				err = s.Insert(ctx, BackendRow{ID: 2, V: "after"})
				s.Close()
			}
			requireFenced(t, err, h.codes().LoginRefused, "a new login of the fenced role")
			require.Equal(t, []int64{1}, ids(rowsOf(t, env, env.Table)), "no write after the fence may be applied")
		}},
		{"FenceEndsOpenSessions", "", func(t TB, h BackendHarness) {
			env := h.Open(t)
			ctx := t.Context()
			idle := login(t, env, env.Role)
			inTxn := login(t, env, env.Role)
			require.NoError(t, idle.Insert(ctx, BackendRow{ID: 1, V: "committed before"}))
			require.NoError(t, inTxn.Begin(ctx))
			require.NoError(t, inTxn.Insert(ctx, BackendRow{ID: 2, V: "open transaction"}))
			require.NoError(t, env.Backend.FenceWrites(ctx, env.Role))
			requireFenced(t, idle.Insert(ctx, BackendRow{ID: 3, V: "idle session after"}), h.codes().SessionEnded, "a write on a session open before the fence")
			err := inTxn.Insert(ctx, BackendRow{ID: 4, V: "open transaction after"})
			if err == nil {
				err = inTxn.Commit(ctx)
			}
			requireFenced(t, err, h.codes().SessionEnded, "a transaction open across the fence")
			require.Equal(t, []int64{1}, ids(rowsOf(t, env, env.Table)), "only the write committed before the fence may be there")
		}},
		{"FenceEndsMemberSessions", "member", func(t TB, h BackendHarness) {
			env := h.Open(t)
			ctx := t.Context()
			m := login(t, env, env.Member)
			require.NoError(t, m.Insert(ctx, BackendRow{ID: 1, V: "member before"}))
			require.NoError(t, env.Backend.FenceWrites(ctx, env.Role))
			requireFenced(t, m.Insert(ctx, BackendRow{ID: 2, V: "member after"}), h.codes().SessionEnded, "a member session acting as the fenced role")
			s, err := env.Login(ctx, env.Member)
			if err == nil {
				err = s.Insert(ctx, BackendRow{ID: 3, V: "member relogin"})
				s.Close()
			}
			requireFenced(t, err, h.codes().LoginRefused, "a new login of a member of the fenced role")
			require.Equal(t, []int64{1}, ids(rowsOf(t, env, env.Table)))
		}},
		{"FenceSparesOtherRoles", "", func(t TB, h BackendHarness) {
			env := h.Open(t)
			ctx := t.Context()
			other := login(t, env, env.Other)
			require.NoError(t, env.Backend.FenceWrites(ctx, env.Role))
			require.NoError(t, other.Insert(ctx, BackendRow{ID: 1, V: "other role, open session"}), "the fence must not end other roles' sessions")
			require.NoError(t, login(t, env, env.Other).Insert(ctx, BackendRow{ID: 2, V: "other role, new login"}), "the fence must not refuse other roles")
			require.Equal(t, []int64{1, 2}, ids(rowsOf(t, env, env.Table)))
		}},
		{"FenceUnknownRoleFails", "", func(t TB, h BackendHarness) {
			env := h.Open(t)
			err := env.Backend.FenceWrites(t.Context(), env.Role+"_no_such_role")
			require.Error(t, err, "fencing a role that does not exist must fail: a misnamed role would leave the real one writing")
			require.NotErrorIs(t, err, adapters.ErrFenced)
			require.Error(t, env.Backend.FenceWrites(t.Context(), ""), "an empty role name must be refused")
		}},
		{"FenceIsIdempotent", "", func(t TB, h BackendHarness) {
			env := h.Open(t)
			ctx := t.Context()
			require.NoError(t, env.Backend.FenceWrites(ctx, env.Role))
			require.NoError(t, env.Backend.FenceWrites(ctx, env.Role), "fencing a fenced role is not an error")
			_, err := env.Login(ctx, env.Role)
			requireFenced(t, err, h.codes().LoginRefused, "a login after fencing twice")
			require.NoError(t, env.Backend.UnfenceWrites(ctx, env.Role))
			require.NoError(t, env.Backend.UnfenceWrites(ctx, env.Role), "unfencing an unfenced role is not an error")
			require.NoError(t, login(t, env, env.Role).Insert(ctx, BackendRow{ID: 1, V: "after"}))
		}},
		{"UnfenceRestores", "", func(t TB, h BackendHarness) {
			env := h.Open(t)
			ctx := t.Context()
			require.NoError(t, env.Backend.FenceWrites(ctx, env.Role))
			require.NoError(t, env.Backend.UnfenceWrites(ctx, env.Role))
			require.NoError(t, login(t, env, env.Role).Insert(ctx, BackendRow{ID: 1, V: "role after unfence"}))
			want := []int64{1}
			if env.Member != "" {
				require.NoError(t, login(t, env, env.Member).Insert(ctx, BackendRow{ID: 2, V: "member after unfence"}), "unfence must give back the members' logins too")
				want = append(want, 2)
			}
			require.Equal(t, want, ids(rowsOf(t, env, env.Table)))
		}},
		{"PreparedListsGIDs", "", func(t TB, h BackendHarness) {
			env := h.Open(t)
			ctx := t.Context()
			for i, gid := range PgDogGIDs {
				require.NoError(t, env.Prepare(ctx, gid, BackendRow{ID: int64(100 + i), V: "prepared"}), "preparing %q", gid)
			}
			xs, err := env.Backend.Prepared(ctx)
			require.NoError(t, err)
			var gids []string
			for _, x := range xs {
				gids = append(gids, x.GID)
			}
			require.ElementsMatch(t, PgDogGIDs, gids, "every prepared transaction, PgDog's or not, with its gid verbatim")
			require.Empty(t, rowsOf(t, env, env.Table), "a prepared transaction's rows are not visible")
			again, err := env.Backend.Prepared(ctx)
			require.NoError(t, err)
			require.ElementsMatch(t, xs, again, "listing must not change what is prepared")
			require.NoError(t, env.Backend.FenceWrites(ctx, env.Role))
			fenced, err := env.Backend.Prepared(ctx)
			require.NoError(t, err)
			require.ElementsMatch(t, xs, fenced, "fencing the owner leaves its prepared transactions in place")
		}},
		{"PreparedMetadata", "prepared-metadata", func(t TB, h BackendHarness) {
			env := h.Open(t)
			ctx := t.Context()
			before := env.Now()
			for i, gid := range PgDogGIDs {
				gid += "_meta" // gids are server-wide: not those another case may have left prepared
				require.NoError(t, env.Prepare(ctx, gid, BackendRow{ID: int64(100 + i), V: "prepared"}), "preparing %q", gid)
			}
			after := env.Now()
			xs, err := env.Backend.Prepared(ctx)
			require.NoError(t, err)
			require.Len(t, xs, len(PgDogGIDs))
			for _, x := range xs {
				require.Equal(t, env.Role, x.Owner, "%q: the owner is the role that prepared it", x.GID)
				require.NotEmpty(t, x.Database, "%q: the database must be named (COMMIT PREPARED must run there)", x.GID)
				const skew = 2 * time.Second
				require.False(t, x.Prepared.Before(before.Add(-skew)) || x.Prepared.After(after.Add(skew)),
					"%q: prepared at %v, outside [%v, %v]", x.GID, x.Prepared, before, after)
			}
		}},
		{"PreparedEmpty", "", func(t TB, h BackendHarness) {
			env := h.Open(t)
			xs, err := env.Backend.Prepared(t.Context())
			require.NoError(t, err)
			require.Empty(t, xs)
		}},
		{"ChecksumEqualForEqualData", "", func(t TB, h BackendHarness) {
			env := h.Open(t)
			ctx := t.Context()
			rows := ChecksumRows()
			rev := slices.Clone(rows)
			slices.Reverse(rev)
			mid := len(rows) / 2
			rot := append(slices.Clone(rows[mid:]), rows[:mid]...)
			var digests []adapters.TableDigest
			for i, order := range [][]BackendRow{rows, rev, rot} {
				table := "ck_eq_" + strconv.Itoa(i)
				require.NoError(t, env.Load(ctx, table, order))
				d, err := env.Backend.Checksum(ctx, table, adapters.ShardFn{})
				require.NoError(t, err)
				require.Equal(t, table, d.Table)
				require.Equal(t, uint64(len(rows)), d.Rows)
				digests = append(digests, d)
			}
			require.Equal(t, digests[0].Sum, digests[1].Sum, "the same rows in reverse physical order must digest the same")
			require.Equal(t, digests[0].Sum, digests[2].Sum, "the same rows in rotated physical order must digest the same")
			require.NotEqual(t, [32]byte{}, digests[0].Sum)
		}},
		{"ChecksumDiffersForChangedRow", "", func(t TB, h BackendHarness) {
			env := h.Open(t)
			ctx := t.Context()
			rows := ChecksumRows()
			changed := slices.Clone(rows)
			changed[17].V += "!"
			rekeyed := slices.Clone(rows)
			rekeyed[3].ID++
			dup := append(slices.Clone(rows), rows[5])
			dup2 := append(slices.Clone(dup), rows[5]) // XOR-combined row hashes would cancel the pair
			variants := map[string][]BackendRow{"orig": rows, "changed": changed, "rekeyed": rekeyed, "missing": rows[1:], "dup": dup, "dup2": dup2}
			seen := map[[32]byte]string{}
			for _, name := range slices.Sorted(maps.Keys(variants)) {
				table := "ck_" + name
				require.NoError(t, env.Load(ctx, table, variants[name]))
				d, err := env.Backend.Checksum(ctx, table, adapters.ShardFn{})
				require.NoError(t, err)
				require.Equal(t, uint64(len(variants[name])), d.Rows, "%s: row count", name)
				if prev, ok := seen[d.Sum]; ok {
					t.Fatalf("tables %q and %q differ in one row but digest the same", prev, name)
				}
				seen[d.Sum] = name
			}
		}},
		{"ChecksumSelectsShardRows", "", func(t TB, h BackendHarness) {
			env := h.Open(t)
			ctx := t.Context()
			rows := ChecksumRows()
			require.NoError(t, env.Load(ctx, "ck_all", rows))
			for _, n := range []uint32{2, 3, 4} {
				scheme := h.scheme(n)
				// The expected shard of each row: pghash directly for the default scheme, else
				// the shard map's own Locate (what the routers' kernels compute).
				shardOf := func(id int64) uint32 {
					if h.Scheme == nil {
						return uint32(pghash.ShardOfInt8(id, uint64(n)))
					}
					loc, err := shardmap.Layout{Scheme: scheme, Shards: make([]shardmap.Shard, n)}.Locate(strconv.FormatInt(id, 10))
					require.NoError(t, err, "locating id %d", id)
					return uint32(loc.Shard)
				}
				var total uint64
				for shard := range n {
					var mine []BackendRow
					for _, r := range rows {
						if shardOf(r.ID) == shard {
							mine = append(mine, r)
						}
					}
					table := fmt.Sprintf("ck_%d_of_%d", shard, n)
					require.NoError(t, env.Load(ctx, table, mine))
					want, err := env.Backend.Checksum(ctx, table, adapters.ShardFn{})
					require.NoError(t, err)
					got, err := env.Backend.Checksum(ctx, "ck_all", adapters.ShardFn{Scheme: scheme, Shard: shard})
					require.NoError(t, err)
					require.Equal(t, want.Rows, got.Rows, "shard %d of %d: rows selected by the routing function", shard, n)
					require.Equal(t, want.Sum, got.Sum, "shard %d of %d: the shard's rows of the whole table must digest like a table of exactly those rows", shard, n)
					total += got.Rows
				}
				require.Equal(t, uint64(len(rows)), total, "the shards of %d partition the table", n)
				_, err := env.Backend.Checksum(ctx, "ck_all", adapters.ShardFn{Scheme: scheme, Shard: n})
				require.Error(t, err, "shard %d does not exist among %d", n, n)
			}
		}},
		{"ChecksumUnknownTable", "", func(t TB, h BackendHarness) {
			env := h.Open(t)
			_, err := env.Backend.Checksum(t.Context(), "no_such_table", adapters.ShardFn{})
			var be *adapters.BackendError
			require.ErrorAs(t, err, &be, "a missing table is the backend's error, with its code")
			require.Equal(t, h.codes().UndefinedTable, be.Code)
			require.False(t, errors.Is(err, adapters.ErrFenced))
		}},
	}
}
