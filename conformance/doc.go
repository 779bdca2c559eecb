// Package conformance holds the contract suites: the same cases run against every
// implementation of a seam, the simulator's in-memory models included, so a model and the
// real system are held to one definition of correct.
//
// A suite is a list of cases, each a function of a TB (the part of testing.TB a case
// needs). RunStoreSuite and RunBackendSuite run them as subtests; the cases are also
// exported so a test can run them (through Record) against a deliberately broken
// implementation and show that each one catches what it claims to (see the mutant tests in
// this package).
//
// The backend suite drives a ShardBackend through a BackendEnv: the backend itself plus
// application-side hooks (log in as a role, insert on a session, prepare a transaction, load
// and read tables), so the real Postgres adapter and the simulator's in-memory model run the
// same cases.
package conformance
