package postgres

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/internal/rowsum"
	"loam.dev/router/kernel/pghash"
	"loam.dev/router/kernel/shardmap"
)

// checksumSettings pins every setting that changes how a value is printed, for this
// transaction only, so equal rows give equal text on any server and for any session defaults.
const checksumSettings = `SELECT set_config('extra_float_digits', '1', true), set_config('DateStyle', 'ISO, MDY', true),
  set_config('IntervalStyle', 'postgres', true), set_config('TimeZone', 'UTC', true),
  set_config('bytea_output', 'hex', true)`

// Checksum digests the rows of table that belong to shard by.Shard under by.Scheme (every row
// when by.Scheme is nil). table is "name" or "schema.name".
//
// Each row is printed by Postgres as its composite text (ROW(t.*)::text, output settings
// pinned) and hashed with SHA-256; the digest adds the row hashes as four 64-bit lanes, so it
// does not depend on the order rows are stored or scanned in, and a duplicated row counts
// twice. Two tables digest the same when they hold the same rows with the same columns in the
// same order. The rows are read in one REPEATABLE READ READ ONLY transaction (one snapshot;
// on a standby too).
//
// Rows are selected in Go with kernel/pghash from the key column's text, under the key type
// the record names, so split verification checks exactly the routing function and not the
// server's idea of it; list and range schemes follow PgDog's rule order through
// shardmap.Layout.Locate. A NULL key belongs to shard 0 under pg_hash, as in a
// hash-partitioned table; a row that no rule holds (no default shard), or a NULL key under
// a list or range scheme, belongs to no single shard and fails the checksum.
func (b *Backend) Checksum(ctx context.Context, table string, by adapters.ShardFn) (adapters.TableDigest, error) {
	const op = "Checksum"
	ident, err := tableIdent(table)
	if err != nil {
		return adapters.TableDigest{}, b.failf(op, "", "%v", err)
	}
	keep, col, err := b.selector(table, by)
	if err != nil {
		return adapters.TableDigest{}, b.failf(op, "", "%v", err)
	}
	tx, err := b.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return adapters.TableDigest{}, b.fail(op, err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, checksumSettings); err != nil {
		return adapters.TableDigest{}, b.fail(op, err)
	}
	q := "SELECT ROW(t.*)::text FROM " + ident + " AS t"
	if col != "" {
		q = "SELECT ROW(t.*)::text, (t." + pgx.Identifier{col}.Sanitize() + ")::text FROM " + ident + " AS t"
	}
	rows, err := tx.Query(ctx, q)
	if err != nil {
		return adapters.TableDigest{}, b.fail(op, fmt.Errorf("reading %s: %w", table, err))
	}
	defer rows.Close()
	d := adapters.TableDigest{Table: table}
	sum := rowsum.New(rowsum.MutantOf(b.mut&mutChecksumOrdered != 0, b.mut&mutChecksumXOR != 0))
	for rows.Next() {
		raw := rows.RawValues()
		if keep != nil {
			ok, err := keep(raw[1])
			if err != nil {
				k := "NULL"
				if raw[1] != nil {
					k = strconv.Quote(string(raw[1]))
				}
				return adapters.TableDigest{}, b.failf(op, "", "%s: key %s = %s: %v", table, col, k, err)
			}
			if !ok {
				continue
			}
		}
		d.Rows++
		sum.Add(raw[0])
	}
	if err := rows.Err(); err != nil {
		return adapters.TableDigest{}, b.fail(op, fmt.Errorf("reading %s: %w", table, err))
	}
	d.Sum = sum.Digest()
	return d, nil
}

// tableIdent quotes "name" or "schema.name" with pgx's identifier quoting.
func tableIdent(table string) (string, error) {
	parts := strings.Split(table, ".")
	if len(parts) > 2 {
		return "", fmt.Errorf("table %q: expected name or schema.name", table)
	}
	for _, p := range parts {
		if p == "" || strings.IndexByte(p, 0) >= 0 {
			return "", fmt.Errorf("table %q: empty or NUL-bearing name part", table)
		}
	}
	return pgx.Identifier(parts).Sanitize(), nil
}

// selector returns the function deciding from a row's key text (nil for NULL) whether it
// belongs to by.Shard, and the key column; nil and "" for every row.
func (b *Backend) selector(table string, by adapters.ShardFn) (func([]byte) (bool, error), string, error) {
	if by.Scheme == nil {
		return nil, "", nil
	}
	key := by.Scheme.ShardKey()
	if key.Column == "" {
		return nil, "", fmt.Errorf("scheme has no key column")
	}
	if len(key.Tables) > 0 {
		name := table[strings.LastIndexByte(table, '.')+1:]
		if !slices.Contains(key.Tables, name) {
			return nil, "", fmt.Errorf("table %q is not among the scheme's sharded tables %q", name, key.Tables)
		}
	}
	n := shardCount(by.Scheme)
	if by.Shard >= n {
		return nil, "", fmt.Errorf("shard %d does not exist: the %s scheme has %d shards", by.Shard, shardmap.SchemeKind(by.Scheme), n)
	}
	if s, ok := by.Scheme.(shardmap.PgHash); ok {
		return b.hashSelector(s, by.Shard)
	}
	// Lists and ranges (PgDog's rule order) and vindexes: the shard map's own Locate.
	layout := shardmap.Layout{Scheme: by.Scheme, Shards: make([]shardmap.Shard, n)}
	return func(raw []byte) (bool, error) {
		var loc shardmap.Location
		var err error
		if raw == nil {
			loc, err = layout.LocateNull()
		} else {
			loc, err = layout.Locate(string(raw))
		}
		if err != nil {
			return false, fmt.Errorf("the row belongs to no single shard: %w", err)
		}
		return loc.Shard == int(by.Shard), nil
	}, key.Column, nil
}

// shardCount is how many shards a scheme routes to: the highest shard a rule or default names,
// plus one.
func shardCount(sc shardmap.Scheme) uint32 {
	var n uint32
	see := func(shard uint32) { n = max(n, shard+1) }
	switch s := sc.(type) {
	case shardmap.PgHash:
		return s.Shards
	case shardmap.PgRange:
		for _, r := range s.Ranges {
			see(r.Shard)
		}
		if s.Default != nil {
			see(*s.Default)
		}
	case shardmap.PgList:
		for _, l := range s.Lists {
			see(l.Shard)
		}
		if s.Default != nil {
			see(*s.Default)
		}
	case shardmap.Vindex:
		return uint32(len(s.Ranges))
	}
	return n
}

// hashSelector selects the rows of one pg_hash shard with kernel/pghash directly: no
// allocation per row, which matters on a big table.
func (b *Backend) hashSelector(s shardmap.PgHash, shard uint32) (func([]byte) (bool, error), string, error) {
	var t pghash.Type
	switch s.Key.Type {
	case shardmap.Bigint:
		t = pghash.TypeInt8
	case shardmap.Integer:
		t = pghash.TypeInt4
	case shardmap.Text:
		t = pghash.TypeText
	case shardmap.UUID:
		t = pghash.TypeUUID
	default:
		return nil, "", fmt.Errorf("key type %v cannot be hashed", s.Key.Type)
	}
	n, want := uint64(s.Shards), uint64(shard)
	signed := b.mut&mutChecksumSignedModulo != 0
	return func(raw []byte) (bool, error) {
		var r pghash.Row // a NULL key: row hash 0, remainder 0
		if raw != nil {
			var err error
			if r, err = pghash.ParseKey(t, string(raw)); err != nil {
				return false, err
			}
		}
		if signed {
			return int64(r.Hash())%int64(n) == int64(want), nil
		}
		return r.Remainder(n) == want, nil
	}, s.Key.Column, nil
}
