// Package adapters holds the I/O seams of Loam Router: the interfaces its drivers call to
// reach real systems, and the error values every implementation returns, so that a caller
// branches the same way whichever system is behind the seam.
//
//   - ShardMapStore keeps shard map records, changed only by compare-and-set on Version.
//   - BlobStore keeps small versioned blobs beside them: machine snapshots, leases.
//   - RouterInstance is one router process (a PgDog instance's admin database).
//   - ShardBackend is one shard's database server (Postgres, MySQL).
//   - VitessControl is vtctld: reparent a promoted tablet, read the serving partitions,
//     apply a VSchema (gRPC implementation: adapters/vtctld).
//   - ConfigTarget is where rendered router files go (adapters/configmap).
//   - Roster lists a database's live router processes, for the in-doubt monitor.
//
// Implementations live in sub-packages (memstore, boltstore, tikv, postgres, pgdog, configmap, ...);
// loam.dev/router/conformance holds the contract suites every implementation passes, and
// the simulator's models pass the same suites.
package adapters
