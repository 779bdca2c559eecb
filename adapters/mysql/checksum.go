package mysql

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/internal/rowsum"
	"loam.dev/router/kernel/shardmap"
)

// Checksum digests the rows of table that belong to shard by.Shard under by.Scheme (every row
// when by.Scheme is nil). table is "name" or "database.name". A MySQL shard sits behind
// Vitess, so the scheme must be a vindex scheme; PgDog's schemes are refused.
//
// Each row is read as the server prints it (the text protocol: every column's text, NULL
// apart; TIMESTAMP columns in UTC, see Open) and encoded column by column (a NULL marker,
// or the length and the bytes), then hashed with SHA-256; the digest adds the row hashes as
// four 64-bit lanes, so it does not depend on the order rows are stored or read in, and a
// duplicated row counts twice. Two tables digest the same when they hold the same rows with
// the same columns in the same order. The rows are read in one REPEATABLE READ READ ONLY
// transaction (one InnoDB snapshot; on a replica too).
//
// Rows are selected in Go: the key column's text is routed by shardmap.Layout.Locate with
// the scheme's vindex (kernel/vindex) and keyspace-ID ranges, the computation vtgate
// makes, so split verification checks exactly the routing function. A row whose key routes
// nowhere (NULL, or text that is not of the key type) fails the checksum.
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
	tx, err := b.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return adapters.TableDigest{}, b.fail(op, err)
	}
	defer tx.Rollback()
	q := "SELECT t.* FROM " + ident + " AS t"
	if col != "" {
		q = "SELECT t.*, t." + QuoteIdent(col) + " FROM " + ident + " AS t"
	}
	rows, err := tx.QueryContext(ctx, q)
	if err != nil {
		return adapters.TableDigest{}, b.fail(op, fmt.Errorf("reading %s: %w", table, err))
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return adapters.TableDigest{}, b.fail(op, err)
	}
	n := len(cols)
	if col != "" {
		n-- // the key, selected again at the end
	}
	raw := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	d := adapters.TableDigest{Table: table}
	sum := rowsum.New(rowsum.MutantOf(b.mut&mutChecksumOrdered != 0, b.mut&mutChecksumXOR != 0))
	var enc []byte
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return adapters.TableDigest{}, b.fail(op, err)
		}
		if keep != nil {
			key := raw[len(raw)-1]
			ok, err := keep(key)
			if err != nil {
				k := "NULL"
				if key != nil {
					k = strconv.Quote(string(key))
				}
				return adapters.TableDigest{}, b.failf(op, "", "%s: key %s = %s: %v", table, col, k, err)
			}
			if !ok {
				continue
			}
		}
		d.Rows++
		enc = b.encodeRow(enc[:0], raw[:n])
		sum.Add(enc)
	}
	if err := rows.Err(); err != nil {
		return adapters.TableDigest{}, b.fail(op, fmt.Errorf("reading %s: %w", table, err))
	}
	d.Sum = sum.Digest()
	return d, nil
}

// encodeRow appends a row's encoding: the column count, then per column 0 for NULL or 1, the
// length and the bytes, so no two different rows encode alike.
func (b *Backend) encodeRow(dst []byte, cols []sql.RawBytes) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(cols)))
	for _, c := range cols {
		if c == nil && b.mut&mutChecksumNullIsEmpty == 0 {
			dst = append(dst, 0)
			continue
		}
		dst = append(dst, 1)
		dst = binary.AppendUvarint(dst, uint64(len(c)))
		dst = append(dst, c...)
	}
	return dst
}

// selector returns the function deciding from a row's key text (nil for NULL) whether it
// belongs to by.Shard, and the key column; nil and "" for every row.
func (b *Backend) selector(table string, by adapters.ShardFn) (func([]byte) (bool, error), string, error) {
	if by.Scheme == nil {
		return nil, "", nil
	}
	s, ok := by.Scheme.(shardmap.Vindex)
	if !ok {
		return nil, "", fmt.Errorf("a %s scheme routes PgDog's Postgres shards; a MySQL shard behind Vitess is routed by a vindex scheme", shardmap.SchemeKind(by.Scheme))
	}
	if s.Key.Column == "" {
		return nil, "", fmt.Errorf("scheme has no key column")
	}
	if len(s.Key.Tables) > 0 {
		name := table[strings.LastIndexByte(table, '.')+1:]
		if !slices.Contains(s.Key.Tables, name) {
			return nil, "", fmt.Errorf("table %q is not among the scheme's sharded tables %q", name, s.Key.Tables)
		}
	}
	if n := uint32(len(s.Ranges)); by.Shard >= n {
		return nil, "", fmt.Errorf("shard %d does not exist: the vindex scheme has %d shards", by.Shard, n)
	}
	if b.mut&mutChecksumWrongVindex != 0 {
		s.Kind = shardmap.VindexXXHash
	}
	layout := shardmap.Layout{Scheme: s, Shards: make([]shardmap.Shard, len(s.Ranges))}
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
	}, s.Key.Column, nil
}
