package conformance_test

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/conformance"
	"loam.dev/router/kernel/pghash"
	"loam.dev/router/kernel/shardmap"
)

// memBackend is a small in-memory shard backend with switchable bugs: roles that may or may
// not log in, a member acting as the application role, sessions the fence ends, tables,
// prepared transactions. Unmutated it must pass the whole backend suite, so every failure
// under a mutation is the mutation's doing.
type memBackend struct {
	mu       sync.Mutex
	mutant   string
	standby  bool
	login    map[string]bool
	actsAs   map[string]string // member -> the role it acts as
	sessions []*memSession
	tables   map[string][]conformance.BackendRow
	prepared map[string]adapters.PreparedXact
	lsn      uint64
}

type memSession struct {
	b     *memBackend
	role  string
	alive bool
	txn   []conformance.BackendRow
	inTxn bool
}

const (
	memApp, memMember, memOther = "app", "member", "other"
)

func newMem(mutant string) *memBackend {
	return &memBackend{
		mutant:   mutant,
		login:    map[string]bool{memApp: true, memMember: true, memOther: true},
		actsAs:   map[string]string{memMember: memApp},
		tables:   map[string][]conformance.BackendRow{"items": nil},
		prepared: map[string]adapters.PreparedXact{},
	}
}

func (b *memBackend) err(op, code string, fenced bool, format string, a ...any) error {
	return &adapters.BackendError{Backend: "mem", Op: op, Code: code, Fenced: fenced, Err: fmt.Errorf(format, a...)}
}

func (b *memBackend) Status(ctx context.Context) (adapters.BackendStatus, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	pos := b.lsn
	if b.mutant == "status-position-frozen" {
		pos = 0
	}
	if b.standby != (b.mutant == "standby-says-primary") {
		replayed := "0/10"
		if b.mutant == "standby-replayed-ahead" {
			replayed = "0/11"
		}
		return adapters.BackendStatus{Role: adapters.RoleStandby, ReadOnly: true, Position: "0/10", Replayed: replayed}, nil
	}
	role := adapters.RolePrimary
	if b.mutant == "status-says-standby" {
		role = adapters.RoleStandby
	}
	return adapters.BackendStatus{Role: role, Position: fmt.Sprintf("0/%X", 0x1000+pos)}, nil
}

// fenced returns the roles a fence of role applies to.
func (b *memBackend) fenced(role string) []string {
	out := []string{role}
	if b.mutant != "fence-skips-members" {
		for m, r := range b.actsAs {
			if r == role {
				out = append(out, m)
			}
		}
	}
	return out
}

func (b *memBackend) FenceWrites(ctx context.Context, role string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.login[role]; !ok && b.mutant != "fence-unknown-role-ok" {
		return b.err("FenceWrites", "42704", false, "role %q does not exist", role)
	}
	if b.mutant == "fence-not-idempotent" && !b.login[role] {
		return b.err("FenceWrites", "", false, "already fenced")
	}
	roles := b.fenced(role)
	if b.mutant != "fence-skips-nologin" {
		for _, r := range roles {
			b.login[r] = false
		}
	}
	if b.mutant == "fence-skips-terminate" {
		return nil
	}
	for _, s := range b.sessions {
		if slices.Contains(roles, s.role) || b.mutant == "fence-ends-all-sessions" {
			s.alive = false
		}
	}
	if b.mutant == "prepared-lost-on-fence" {
		clear(b.prepared)
	}
	return nil
}

func (b *memBackend) UnfenceWrites(ctx context.Context, role string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mutant == "unfence-noop" {
		return nil
	}
	roles := b.fenced(role)
	if b.mutant == "unfence-forgets-members" {
		roles = roles[:1]
	}
	for _, r := range roles {
		b.login[r] = true
	}
	return nil
}

func (b *memBackend) Prepared(ctx context.Context) ([]adapters.PreparedXact, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := []adapters.PreparedXact{}
	if b.mutant == "prepared-phantom" {
		out = append(out, adapters.PreparedXact{GID: "__pgdog_2pc_ghost_1_0", Owner: memApp, Database: "app", Prepared: time.Now()})
	}
	for _, gid := range slices.Sorted(maps.Keys(b.prepared)) {
		if b.mutant == "prepared-drops-foreign" && !strings.HasPrefix(gid, "__pgdog_2pc_") {
			continue
		}
		out = append(out, b.prepared[gid])
	}
	return out, nil
}

func (b *memBackend) Checksum(ctx context.Context, table string, by adapters.ShardFn) (adapters.TableDigest, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	rows, ok := b.tables[table]
	if !ok && b.mutant != "checksum-missing-table-empty" {
		return adapters.TableDigest{}, b.err("Checksum", "42P01", false, "relation %q does not exist", table)
	}
	var keep func(int64) bool
	switch s := by.Scheme.(type) {
	case nil:
	case shardmap.PgHash:
		if by.Shard >= s.Shards {
			return adapters.TableDigest{}, b.err("Checksum", "", false, "no shard %d of %d", by.Shard, s.Shards)
		}
		keep = func(id int64) bool {
			if b.mutant == "checksum-signed-modulo" {
				var r pghash.Row
				r.Int8(id)
				return int64(r.Hash())%int64(s.Shards) == int64(by.Shard)
			}
			return pghash.ShardOfInt8(id, uint64(s.Shards)) == uint64(by.Shard)
		}
	default:
		return adapters.TableDigest{}, b.err("Checksum", "", false, "unsupported scheme")
	}
	d := adapters.TableDigest{Table: table}
	var acc [4]uint64
	for _, r := range rows {
		if keep != nil && !keep(r.ID) {
			continue
		}
		d.Rows++
		text := fmt.Sprintf("(%d,%q)", r.ID, r.V)
		if b.mutant == "checksum-ignores-value" {
			text = fmt.Sprint(r.ID)
		}
		h := sha256.Sum256([]byte(text))
		if b.mutant == "checksum-ordered" {
			h = sha256.Sum256(append(binary.BigEndian.AppendUint64(nil, acc[0]), h[:]...))
		}
		for i := range acc {
			w := binary.BigEndian.Uint64(h[i*8:])
			switch b.mutant {
			case "checksum-xor":
				acc[i] ^= w
			case "checksum-ordered":
				acc[i] = w
			default:
				acc[i] += w
			}
		}
	}
	for i := range acc {
		binary.BigEndian.PutUint64(d.Sum[i*8:], acc[i])
	}
	return d, nil
}

func (s *memSession) check(op string) error {
	if !s.alive {
		if s.b.mutant == "fence-wrong-code" {
			return s.b.err(op, "08006", false, "connection lost")
		}
		return s.b.err(op, "57P01", true, "terminating connection due to administrator command")
	}
	return nil
}

func (s *memSession) Insert(ctx context.Context, r conformance.BackendRow) error {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if err := s.check("Insert"); err != nil {
		return err
	}
	if s.inTxn {
		s.txn = append(s.txn, r)
		return nil
	}
	s.b.tables["items"] = append(s.b.tables["items"], r)
	s.b.lsn++
	return nil
}

func (s *memSession) Begin(ctx context.Context) error {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.inTxn = true
	return s.check("Begin")
}

func (s *memSession) Commit(ctx context.Context) error {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if err := s.check("Commit"); err != nil {
		return err
	}
	s.b.tables["items"] = append(s.b.tables["items"], s.txn...)
	s.b.lsn += uint64(len(s.txn))
	s.txn, s.inTxn = nil, false
	return nil
}

func (s *memSession) Close() {}

func memHarness(mutant string) conformance.BackendHarness {
	return conformance.BackendHarness{
		Members: true,
		OpenStandby: func(conformance.TB) adapters.ShardBackend {
			b := newMem(mutant)
			b.standby = true
			return b
		},
		Open: func(conformance.TB) *conformance.BackendEnv {
			b := newMem(mutant)
			return &conformance.BackendEnv{
				Backend: b, Role: memApp, Member: memMember, Other: memOther, Table: "items",
				Login: func(ctx context.Context, role string) (conformance.AppSession, error) {
					b.mu.Lock()
					defer b.mu.Unlock()
					if !b.login[role] {
						if b.mutant == "fence-wrong-code" {
							return nil, b.err("Login", "53300", false, "too many connections")
						}
						return nil, b.err("Login", "28000", true, "role %q is not permitted to log in", role)
					}
					s := &memSession{b: b, role: role, alive: true}
					b.sessions = append(b.sessions, s)
					return s, nil
				},
				Load: func(ctx context.Context, table string, rows []conformance.BackendRow) error {
					b.mu.Lock()
					defer b.mu.Unlock()
					b.tables[table] = append(b.tables[table], rows...)
					return nil
				},
				Rows: func(ctx context.Context, table string) ([]conformance.BackendRow, error) {
					b.mu.Lock()
					defer b.mu.Unlock()
					out := slices.Clone(b.tables[table])
					slices.SortFunc(out, func(x, y conformance.BackendRow) int {
						return cmp.Or(cmp.Compare(x.ID, y.ID), strings.Compare(x.V, y.V))
					})
					return out, nil
				},
				Prepare: func(ctx context.Context, gid string, r conformance.BackendRow) error {
					b.mu.Lock()
					defer b.mu.Unlock()
					if !b.login[memApp] {
						return b.err("Prepare", "28000", true, "not permitted to log in")
					}
					owner := memApp
					if b.mutant == "prepared-wrong-owner" {
						owner = "postgres"
					}
					b.prepared[gid] = adapters.PreparedXact{GID: gid, Prepared: time.Now(), Owner: owner, Database: "app"}
					if b.mutant == "prepared-rows-visible" {
						b.tables["items"] = append(b.tables["items"], r)
					}
					return nil
				},
				Now: time.Now,
			}
		},
	}
}

// TestBackendSuiteCatchesMutants: each broken backend must fail the cases named for it, and
// the unbroken one must pass every case.
func TestBackendSuiteCatchesMutants(t *testing.T) {
	mutants := map[string][]string{
		"":                             nil,
		"status-says-standby":          {"StatusPrimary"},
		"status-position-frozen":       {"StatusPrimary"},
		"standby-says-primary":         {"StatusStandby"},
		"standby-replayed-ahead":       {"StatusStandby"},
		"fence-skips-nologin":          {"FenceRefusesNewLogin", "FenceIsIdempotent"},
		"fence-skips-terminate":        {"FenceEndsOpenSessions", "FenceEndsMemberSessions"},
		"fence-skips-members":          {"FenceEndsMemberSessions"},
		"fence-ends-all-sessions":      {"FenceSparesOtherRoles"},
		"fence-wrong-code":             {"FenceRefusesNewLogin", "FenceEndsOpenSessions"},
		"fence-unknown-role-ok":        {"FenceUnknownRoleFails"},
		"fence-not-idempotent":         {"FenceIsIdempotent"},
		"unfence-noop":                 {"FenceIsIdempotent", "UnfenceRestores"},
		"unfence-forgets-members":      {"UnfenceRestores"},
		"prepared-drops-foreign":       {"PreparedListsGIDs"},
		"prepared-rows-visible":        {"PreparedListsGIDs"},
		"prepared-wrong-owner":         {"PreparedMetadata"},
		"prepared-lost-on-fence":       {"PreparedListsGIDs"},
		"prepared-phantom":             {"PreparedEmpty", "PreparedListsGIDs"},
		"checksum-ordered":             {"ChecksumEqualForEqualData"},
		"checksum-xor":                 {"ChecksumDiffersForChangedRow"},
		"checksum-ignores-value":       {"ChecksumDiffersForChangedRow"},
		"checksum-signed-modulo":       {"ChecksumSelectsShardRows"},
		"checksum-missing-table-empty": {"ChecksumUnknownTable"},
	}
	cases := conformance.BackendCases()
	caught := map[string]bool{}
	for _, mutant := range slices.Sorted(maps.Keys(mutants)) {
		t.Run("mutant="+mutant, func(t *testing.T) {
			h := memHarness(mutant)
			var failed []string
			for _, c := range cases {
				out := conformance.Record(context.Background(), c.Name, func(tb conformance.TB) { c.Run(tb, h) })
				if out.Failed {
					failed = append(failed, c.Name)
					if mutant == "" {
						t.Errorf("the unmutated backend fails %s: %v", c.Name, out.Msgs)
					}
				}
			}
			for _, name := range mutants[mutant] {
				caught[name] = true
				if !slices.Contains(failed, name) {
					t.Errorf("mutant %q was not caught by case %s (failing cases: %v)", mutant, name, failed)
				}
			}
		})
	}
	for _, c := range cases {
		if !caught[c.Name] {
			t.Errorf("case %s catches no mutant here: add one that only it catches", c.Name)
		}
	}
}
