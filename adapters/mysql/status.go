package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strconv"
	"time"

	"loam.dev/router/adapters"
)

// LagUnknown is the Lag Status reports for a replica whose replication is not running
// (Seconds_Behind_Master is NULL): it is as far behind as anything can be, so a caller
// choosing by lag never prefers it.
const LagUnknown = time.Duration(math.MaxInt64)

// replicaStatus is SHOW REPLICA STATUS by column name; nil when the server replicates from
// none. MariaDB (10.5.1+) and MySQL (8.0.22+) both take the statement, and name the columns
// differently (Seconds_Behind_Master / Seconds_Behind_Source); get takes either.
type replicaStatus map[string]sql.NullString

func (r replicaStatus) get(names ...string) sql.NullString {
	for _, n := range names {
		if v, ok := r[n]; ok {
			return v
		}
	}
	return sql.NullString{}
}

func (b *Backend) replicaStatus(ctx context.Context) (replicaStatus, error) {
	rows, err := b.db.QueryContext(ctx, "SHOW REPLICA STATUS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	if !rows.Next() {
		return nil, rows.Err()
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	st := make(replicaStatus, len(cols))
	for i, c := range cols {
		st[c] = vals[i]
	}
	return st, rows.Err()
}

// Status reports the server's role (a replica is a server with a replication source
// configured, running or not), whether it refuses writes (@@read_only; a replica need not),
// and positions as GTIDs in the server's own form (see Position):
//
//   - a primary's Position is what it has written to its binary log: MariaDB's
//     @@gtid_binlog_pos (the form of @@gtid_current_pos; the two differ only in domains
//     this server last received as a replica), MySQL's @@gtid_executed;
//   - a replica's Position is what it has received, merged with what it has applied
//     (MariaDB Gtid_IO_Pos with @@gtid_slave_pos; MySQL Retrieved_Gtid_Set with
//     @@gtid_executed), and Replayed what it has applied (@@gtid_slave_pos;
//     @@gtid_executed).
//
// A replica's Lag is Seconds_Behind_Master (whole seconds: the age of the event being
// applied), 0 once it has applied all it received, and LagUnknown when replication is not
// running. MariaDB multi-source replicas report their default connection only.
func (b *Backend) Status(ctx context.Context) (adapters.BackendStatus, error) {
	const op = "Status"
	var ro bool
	var binlogPos, applied string
	q := "SELECT @@GLOBAL.read_only <> 0, @@GLOBAL.gtid_binlog_pos, @@GLOBAL.gtid_slave_pos"
	if b.flavor == MySQL {
		q = "SELECT @@GLOBAL.read_only <> 0, @@GLOBAL.gtid_executed, @@GLOBAL.gtid_executed"
	}
	if b.mut&mutStatusSlavePos != 0 {
		q = "SELECT @@GLOBAL.read_only <> 0, @@GLOBAL.gtid_slave_pos, @@GLOBAL.gtid_slave_pos"
	}
	if err := b.db.QueryRowContext(ctx, q).Scan(&ro, &binlogPos, &applied); err != nil {
		return adapters.BackendStatus{}, b.fail(op, err)
	}
	rs, err := b.replicaStatus(ctx)
	if err != nil {
		return adapters.BackendStatus{}, b.fail(op, fmt.Errorf("SHOW REPLICA STATUS: %w", err))
	}
	if rs == nil && b.mut&mutStatusStandby == 0 {
		pos, err := ParsePosition(binlogPos)
		if err != nil {
			return adapters.BackendStatus{}, b.failf(op, "", "reading the write position: %v", err)
		}
		return adapters.BackendStatus{Role: adapters.RolePrimary, ReadOnly: ro, Position: pos.String()}, nil
	}
	st := adapters.BackendStatus{Role: adapters.RoleStandby, ReadOnly: ro, Lag: LagUnknown}
	if lag := rs.get("Seconds_Behind_Master", "Seconds_Behind_Source"); lag.Valid {
		secs, err := strconv.ParseInt(lag.String, 10, 64)
		if err != nil || secs < 0 {
			return adapters.BackendStatus{}, b.failf(op, "", "Seconds_Behind_Master %q is not a number of seconds", lag.String)
		}
		st.Lag = time.Duration(secs) * time.Second
	}
	replayed, err := ParsePosition(applied)
	if err != nil {
		return adapters.BackendStatus{}, b.failf(op, "", "reading the applied position: %v", err)
	}
	received, err := ParsePosition(rs.get("Gtid_IO_Pos", "Retrieved_Gtid_Set").String)
	if err != nil {
		return adapters.BackendStatus{}, b.failf(op, "", "reading the received position: %v", err)
	}
	if received, err = received.Merge(replayed); err != nil {
		return adapters.BackendStatus{}, b.failf(op, "", "received and applied positions: %v", err)
	}
	st.Position, st.Replayed = received.String(), replayed.String()
	return st, nil
}
