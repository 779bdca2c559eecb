// Package causalread is the causal-read selector: it drives the causal-read machine
// (machine/causal) with a real clock, timers, an LSN poller per endpoint
// (adapters/postgres.LSNPoller, on a connection of its own) and the application's pgx
// pools, so that a frontend's read sees its own earlier writes.
//
// It lives on the driver side, not in adapters/postgres, because it decides: which
// endpoint may serve a read, when a request waits and when it fails, are the machine's
// answers, and this package runs the machine. The adapter keeps what it executes: the
// polling query and the connection. The controller's LSN monitor (loamrouter serve with
// [[lsn.endpoints]]) is a selector with no application pools.
package causalread
