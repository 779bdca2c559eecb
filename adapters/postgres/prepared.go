package postgres

import (
	"context"

	"loam.dev/router/adapters"
)

// preparedQuery lists this database's prepared transactions. pg_prepared_xacts shows those
// of every database on the server; another database's belong to another shard (or another
// application) and are not this backend's, and COMMIT/ROLLBACK PREPARED could not reach them
// from here anyway (0A000).
const preparedQuery = `SELECT gid, prepared, owner::text, database::text
FROM pg_prepared_xacts WHERE database = current_database() ORDER BY prepared, gid`

const preparedAllQuery = `SELECT gid, prepared, owner::text, database::text
FROM pg_prepared_xacts ORDER BY prepared, gid`

// Prepared lists the prepared transactions of this backend's database, oldest first, with
// their gids verbatim (PgDog's __pgdog_2pc_… or anyone else's). It only reads: nothing in
// this package commits or rolls one back.
func (b *Backend) Prepared(ctx context.Context) ([]adapters.PreparedXact, error) {
	q := preparedQuery
	if b.mut&mutPreparedAllDatabases != 0 {
		q = preparedAllQuery
	}
	rows, err := b.pool.Query(ctx, q)
	if err != nil {
		return nil, b.fail("Prepared", err)
	}
	defer rows.Close()
	out := []adapters.PreparedXact{}
	for rows.Next() {
		var x adapters.PreparedXact
		if err := rows.Scan(&x.GID, &x.Prepared, &x.Owner, &x.Database); err != nil {
			return nil, b.fail("Prepared", err)
		}
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, b.fail("Prepared", err)
	}
	return out, nil
}
