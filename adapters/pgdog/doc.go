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
// Where each fact is in PgDog's public source (github.com/pgdogdev/pgdog, AGPL-3.0, read
// at commit 3ee07ab0, 2026-08-14, crate 0.1.53; never copied):
//
//   - pgdog/src/admin/server.rs: a message other than Query is refused (Error::SimpleOnly);
//     the query is lowercased whole before admin/parser.rs parses it; a parse error is
//     answered with ErrorResponse::protocol_violation (ERROR, 08P01) and the connection
//     stays; the reply ends with CommandComplete carrying the command's name().
//   - pgdog/src/backend/pool/connection/binding.rs and pgdog/src/frontend/client/mod.rs
//     (spawn_internal): an error while a command runs goes up through the client, which
//     sends ErrorResponse::from_client_err (FATAL, 58000, pgdog/src/net/messages/
//     error_response.rs) and ends the connection. The extended-protocol refusal takes the
//     same path, so it is FATAL 58000 too (the stand-in answers a non-fatal ERROR; the
//     adapter never sends the extended protocol, so nothing depends on it).
//   - pgdog/src/admin/reload.rs and pgdog/src/backend/databases.rs (reload): RELOAD loads
//     config_path and users_path, the paths the process was started with, and replaces the
//     databases only once both parsed.
//   - pgdog/src/admin/pause.rs, maintenance_mode.rs, cutover.rs, stop_task.rs: the tags are
//     PAUSE, RESUME, "MAINTENANCE ON|OFF [database]", CUTOVER, STOP_TASK.
//   - pgdog/src/admin/copy_data.rs: COPY_DATA <from> <to> <publication> [slot], arguments
//     split on single spaces; the schema is synced with pg_dump (pg_dump_path, default
//     "pg_dump" on PATH; pgdog/src/backend/schema/sync/pg_dump.rs).
//   - pgdog-config/src/general.rs: host and port default to PGDOG_HOST and PGDOG_PORT
//     (0.0.0.0:6432 without them) when pgdog.toml leaves them out, as kernel/render's files
//     do; conformance/pgdogtest relies on it to listen on 127.0.0.1.
//
// The package's tests run the adapter against a protocol-level stand-in built with
// pgproto3 (standin_test.go; tests named TestStandIn), which answers with the reply shapes
// pgdog.md documents, and, with LOAM_PGDOG_BIN set, against real PgDog instances
// (conformance/pgdogtest; tests named TestRealPgDog, on real Postgres through
// conformance/pgtest). TestRealPgDogTranscript records what a real PgDog answered to every
// admin command into testdata/transcript.json (-record), the script the stand-in is to
// replay (transcript_test.go holds the format and the check, Transcript.conform).
package pgdog
