// Package pgdogtest starts real PgDog instances for tests, the way pgtest starts Postgres:
// each on a free port of 127.0.0.1 in its own temporary directory, reading the pgdog.toml
// and users.toml the test rendered with kernel/render (laid out by adapters/configmap, so
// the adapter's Apply and RELOAD work on it as on a deployed instance), stopped and removed
// when the test that started it ends.
//
//   - The binary comes from LOAM_PGDOG_BIN. Without it a test skips with a message starting
//     "skipped: needs pgdog (LOAM_PGDOG_BIN)", and it skips under LOAM_REQUIRE_REAL=1 too
//     (unlike pgtest): PgDog is built from source on the development machine (its git
//     dependencies are not on crates.io), which CI cannot do, so the real-PgDog tests are a
//     development gate and CI runs the adapter against the stand-in that replays what they
//     recorded (adapters/pgdog/testdata).
//   - PgDog reads its listen address from PGDOG_HOST and PGDOG_PORT when pgdog.toml leaves
//     host and port out, as kernel/render's files do: the instances listen on 127.0.0.1 only.
//   - The admin database, like the clients, is behind the users.toml the files carry.
package pgdogtest
