package model

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"slices"

	"loam.dev/router/adapters"
	"loam.dev/router/kernel/pghash"
	"loam.dev/router/kernel/shardmap"
)

// TableRow is a row of a plain table (id bigint, v text): what the backend contract suite
// loads, inserts, prepares and checksums. The scenarios' list rows are a separate store.
type TableRow struct {
	ID int64
	V  string
}

// ErrNoTable is wrapped by Checksum for a table the model does not hold (Postgres 42P01).
var ErrNoTable = errors.New("model: no such table")

// LoadTable creates table if it does not exist and appends rows in order, as an
// administrator (the fence does not apply).
func (b *Backend) LoadTable(table string, rows []TableRow) {
	if b.tables == nil {
		b.tables = map[string][]TableRow{}
	}
	if _, ok := b.tables[table]; !ok {
		b.tables[table] = []TableRow{}
	}
	b.insertRows(table, rows)
}

func (b *Backend) insertRows(table string, rows []TableRow) {
	if b.tables == nil {
		b.tables = map[string][]TableRow{}
	}
	b.tables[table] = append(b.tables[table], rows...)
	b.lsn += uint64(len(rows))
}

// TableRows returns every committed row of table, ordered by id then v.
func (b *Backend) TableRows(table string) []TableRow {
	out := slices.Clone(b.tables[table])
	slices.SortFunc(out, func(x, y TableRow) int {
		if c := cmp.Compare(x.ID, y.ID); c != 0 {
			return c
		}
		return cmp.Compare(x.V, y.V)
	})
	return out
}

// InsertRows commits rows into table in a session of role (sess 0: log in first), all at
// once: one autocommit insert, or a transaction's commit. It returns the session.
func (b *Backend) InsertRows(role string, sess uint64, table string, rows []TableRow) (uint64, error) {
	sess, err := b.connect("Insert", role, sess)
	if err != nil {
		return 0, err
	}
	b.insertRows(table, rows)
	b.committed()
	return sess, nil
}

// Check returns an error if the session cannot run a statement now (ended by the fence or a
// restart), as a statement inside an open transaction would find out.
func (b *Backend) Check(role string, sess uint64) error {
	_, err := b.connect("Insert", role, sess)
	return err
}

// PrepareRows runs, in a session of role, a transaction inserting rows into table and
// prepares it as gid.
func (b *Backend) PrepareRows(role string, sess uint64, gid, table string, rows []TableRow) (uint64, error) {
	sess, err := b.connect("Prepare", role, sess)
	if err != nil {
		return 0, err
	}
	if _, dup := b.prepared[gid]; dup {
		return sess, b.err("Prepare", CodeDuplicate, false, "transaction identifier %q is already in use", gid)
	}
	b.prepared[gid] = &PreparedTxn{GID: gid, At: b.now(), Owner: role, Table: table, Rows: slices.Clone(rows)}
	return sess, nil
}

// Checksum digests the rows of table that belong to by.Shard under by.Scheme (every row
// when Scheme is nil), order-independently: the sum, word by word, of each row's SHA-256, so
// equal rows in any physical order digest the same and a duplicate row counts twice. Only
// PgHash schemes are modelled (Postgres hash partitioning of a bigint key on the id).
func (b *Backend) Checksum(table string, by adapters.ShardFn) (adapters.TableDigest, error) {
	rows, ok := b.tables[table]
	if !ok {
		return adapters.TableDigest{}, b.err("Checksum", "42P01", false, "relation %q does not exist: %w", table, ErrNoTable)
	}
	var shards uint64
	switch sc := by.Scheme.(type) {
	case nil:
	case shardmap.PgHash:
		shards = uint64(sc.Shards)
		if uint64(by.Shard) >= shards {
			return adapters.TableDigest{}, b.err("Checksum", "22023", false, "shard %d does not exist among %d", by.Shard, shards)
		}
	default:
		return adapters.TableDigest{}, b.err("Checksum", "0A000", false, "the model checksums only by PgHash, not %T", by.Scheme)
	}
	d := adapters.TableDigest{Table: table}
	var acc [4]uint64
	for _, r := range rows {
		if shards > 0 && pghash.ShardOfInt8(r.ID, shards) != uint64(by.Shard) {
			continue
		}
		d.Rows++
		h := sha256.New()
		h.Write(binary.LittleEndian.AppendUint64(nil, uint64(r.ID)))
		h.Write([]byte(r.V))
		sum := h.Sum(nil)
		for i := range acc {
			acc[i] += binary.LittleEndian.Uint64(sum[i*8:])
		}
	}
	for i := range acc {
		binary.LittleEndian.PutUint64(d.Sum[i*8:], acc[i])
	}
	return d, nil
}
