package driver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"loam.dev/router/kernel/shardmap"
)

// VtgateCheck is the Vitess reshard's Verify step (VReshardExecutor.Verify) done through
// vtgate: after the writes switched, each target shard is read through vtgate (a session
// targeted at keyspace:shard@primary), and every key read there must be one the stored
// record locates on that shard. A row vtgate serves from another shard than the record
// names would be routed one way by vtgate and another by every checker and `locate`: that is
// the verdict ErrVerifyFailed, on which the machine reverses the traffic. A shard vtgate
// cannot serve from is an error the machine retries.
type VtgateCheck struct {
	// DB is a pool of vtgate's MySQL protocol (no database selected).
	DB *sql.DB
	// Record reads the stored record (the mirror's, after the switch).
	Record func(ctx context.Context) (*shardmap.Record, error)
	// Sample bounds the rows read per table and shard (default 10000).
	Sample int
}

// Verify checks keyspace's shards; see VtgateCheck.
func (v VtgateCheck) Verify(ctx context.Context, keyspace string, shards []string) error {
	rec, err := v.Record(ctx)
	if err != nil {
		return err
	}
	vx, ok := rec.Layout.Scheme.(shardmap.Vindex)
	if !ok {
		return fmt.Errorf("%w: the record of %s has a %s scheme, not a vindex", ErrVerifyFailed, keyspace, shardmap.SchemeKind(rec.Layout.Scheme))
	}
	sample := v.Sample
	if sample <= 0 {
		sample = 10000
	}
	for _, sh := range shards {
		if err := v.shard(ctx, rec, vx.Key, keyspace, sh, sample); err != nil {
			return err
		}
	}
	return nil
}

func (v VtgateCheck) shard(ctx context.Context, rec *shardmap.Record, key shardmap.Key, keyspace, shard string, sample int) error {
	conn, err := v.DB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("driver: vtgate: %w", err)
	}
	defer conn.Close()
	target := keyspace + ":" + shard + "@primary"
	if _, err := conn.ExecContext(ctx, "USE "+quoteIdent(target)); err != nil {
		return fmt.Errorf("driver: vtgate: USE %s: %w", target, err)
	}
	tables := key.Tables
	if len(tables) == 0 {
		if tables, err = strings1(ctx, conn, "SHOW TABLES"); err != nil {
			return fmt.Errorf("driver: vtgate: SHOW TABLES on %s: %w", target, err)
		}
	}
	for _, table := range tables {
		q := fmt.Sprintf("SELECT %s FROM %s LIMIT %d", quoteIdent(key.Column), quoteIdent(table), sample)
		keys, err := strings1(ctx, conn, q)
		if err != nil {
			return fmt.Errorf("driver: vtgate: %s on %s: %w", q, target, err)
		}
		for _, k := range keys {
			loc, err := rec.Layout.Locate(k)
			if err != nil {
				return fmt.Errorf("%w: %s.%s = %q read from %s: %v", ErrVerifyFailed, table, key.Column, k, target, err)
			}
			if loc.Name != shard {
				return fmt.Errorf("%w: %s row %s = %s is on shard %s, but the record (generation %d) locates it on %s",
					ErrVerifyFailed, table, key.Column, k, shard, rec.Generation, loc.Name)
			}
		}
	}
	return nil
}

// strings1 runs a query of one column and returns its values as text (NULL as "").
func strings1(ctx context.Context, conn *sql.Conn, q string) ([]string, error) {
	rows, err := conn.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s sql.NullString
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s.String)
	}
	return out, errors.Join(rows.Err(), rows.Close())
}

// quoteIdent quotes a MySQL identifier.
func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }
