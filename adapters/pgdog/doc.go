// Package pgdog is the RouterInstance for PgDog: it drives one PgDog instance through its
// admin database (RELOAD, PAUSE, RESUME, MAINTENANCE, SHOW POOLS/CONFIG/TASKS/
// REPLICATION_SLOTS/VERSION/PEERS, COPY_DATA, RESHARD, CUTOVER, STOP_TASK) and decodes the
// replies into typed rows.
//
// What shapes it, from PgDog's admin database as documented in the project's pgdog.md
// (PgDog 0.1.54):
//
//   - Only the simple query protocol is accepted, one command per Query message, semicolons
//     stripped. The adapter sends each command as one Query message over pgx's pgconn and
//     never uses the extended protocol.
//   - The whole command is lowercased before parsing and arguments are split on single
//     spaces, so every name (database, publication, slot) is checked by CheckName before
//     sending: "PAUSE App" would pause "app".
//   - A command PgDog cannot parse gets a non-fatal ErrorResponse with SQLSTATE 08P01
//     (ErrSyntax). A command that fails while running gets, per pgdog.md's reading of the
//     code (unconfirmed), a FATAL ErrorResponse with SQLSTATE 58000 and the connection is
//     closed (ErrExecution); the adapter reconnects for the next command. Every error is an
//     *adapters.RouterError keeping the SQLSTATE; one that means the instance could not be
//     reached, or the connection broke under a command, matches adapters.ErrUnreachable.
//   - RELOAD re-reads only the files the process was started with (--config, --users), and
//     no command accepts config content. Apply therefore writes the rendered files into the
//     instance's directory (Config.Dir) through adapters/configmap, whose links switch to a
//     whole new generation at once and refuse to go back to an older one, then sends RELOAD.
//   - PgDog has no config generation and SHOW CONFIG shows [general] values only. The
//     generation is read from SHOW POOLS instead: kernel/render's files create a marker
//     pool (database <db>__generation_<g>, user __loam_generation) that exists only when both
//     files of generation g are loaded (render.GenerationFromPools). Apply fails with
//     ErrNotLoaded when RELOAD succeeded but the marker does not show.
//   - Maintenance holds survive RELOAD and no command reports them; CUTOVER and the end of
//     any cutover on an instance clear all of them.
//
// PgDog cannot be built or run where this package's tests run. They run the adapter against
// a protocol-level stand-in built with pgproto3 (standin_test.go; tests named TestStandIn),
// which answers with the reply shapes pgdog.md documents. They show the adapter speaks that
// protocol, not that PgDog does; running it against a real PgDog is the RT4 gate.
package pgdog
