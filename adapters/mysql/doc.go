// Package mysql reaches MySQL-protocol servers for the control plane: a ShardBackend for one
// shard's server (a WeSQL or MySQL primary behind Vitess; MariaDB too), with status, the
// write fence, prepared XA branches and checksums for split verification, over
// github.com/go-sql-driver/mysql.
//
// # The fence
//
// A failover must make the old primary useless to a router that still reaches it, and a
// cutover the old shards. FenceWrites does it in the server itself: ALTER USER … ACCOUNT
// LOCK on every host entry of the application user, so a new login fails (4151 on MariaDB,
// 3118 on MySQL), then KILL CONNECTION on every connection of the user until none is left,
// since a lock alone leaves open connections writing. read_only is not a fence: it leaves
// reads serving stale data and does not bind users with SUPER or READ_ONLY ADMIN, and
// MariaDB has no super_read_only. A killed connection gets no error number at all (the
// driver reports mysql.ErrInvalidConn or driver.ErrBadConn): ClassifySession tells the fence
// apart from other lost connections by logging in again and meeting the lock.
//
// The fence runs with sql_log_bin = 0 (Options.Binlog), so it adds no GTID to an old
// primary that must later rejoin as a replica. It records the accounts it locked in a table
// (FenceTable) and UnfenceWrites unlocks only those. A call cut short returns only once its
// server connection is gone (settle.go).
//
// # Flavors and positions
//
// Open tells MariaDB from MySQL by the server's version. Positions are GTIDs in the
// server's own form: MariaDB's domain-server-seqno list, MySQL's GTID set (Position,
// ParsePosition, ComparePositions; see Status for which variables). MySQL 8.0.22+ and
// MariaDB 10.5.1+ are needed (SHOW REPLICA STATUS). Only MariaDB 10.11 is tested here
// (conformance/mysqltest); the MySQL statements follow MySQL's documentation.
//
// # Privileges
//
// The Backend's account needs, on MariaDB: CREATE USER (ACCOUNT LOCK), PROCESS (to see
// other users' connections, granted to the account itself), CONNECTION ADMIN (KILL), BINLOG
// ADMIN (sql_log_bin), SELECT on mysql.global_priv (the lock state), and CREATE, SELECT,
// INSERT, UPDATE and DELETE on the fence schema (default loam.*). On MySQL: CREATE USER, PROCESS,
// CONNECTION_ADMIN, SYSTEM_VARIABLES_ADMIN (or SESSION_VARIABLES_ADMIN), SELECT on
// mysql.user, the fence schema, and XA_RECOVER_ADMIN to see other users' XA branches.
// Status needs SLAVE MONITOR on MariaDB, REPLICATION CLIENT on MySQL.
//
// # Errors
//
// Every error is an *adapters.BackendError naming the server and the operation, keeping the
// MySQL error number as Code, matching adapters.ErrFenced exactly when the fence refused
// (IsFenceError, ClassifySession), and adapters.ErrUnreachable when no connection could be
// opened (the failover's old primary is often down).
//
// # Identifiers
//
// Account, table and column names reach SQL only through QuoteIdent (backticks, doubled
// inside), and values through bind parameters; a KILL's connection id is a number read from
// the server. Nothing is pasted.
package mysql
