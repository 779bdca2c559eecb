// Package valkey is the fenced session directory on Redis/Valkey: the Lua scripts of every
// migration version (O, A, B, C and the backfill), the executor that carries out the
// fencemigrate machine's commands (pod versions, backfill, a complete scan for live old-key
// leases), and the scored-expiry registry index that replaces SCAN-based peer discovery.
//
// Why each piece looks as it does:
//
//   - Scripts are run with EVALSHA and fall back to EVAL on NOSCRIPT on the node that
//     answered: script caches are per node and are emptied by restarts, failovers, SCRIPT
//     FLUSH and slot moves, so pre-loading never suffices.
//   - A call answered TRYAGAIN (its keys are split by a live slot migration; the script did
//     not run) is retried with a short backoff; MOVED and ASK are followed by the client.
//   - On a cluster client, a call whose keys span slots is refused with ErrCrossSlot before it
//     is sent: valkey-go panics on such a command. Versions O, A and B and the backfill read
//     the old keys, whose lease and generation sit in different slots, so NewDirectory refuses
//     them on a cluster client (ErrClusterMode); those phases run with cluster mode disabled.
//   - A scan "of the keyspace" goes to every primary, to cursor 0, and is repeated while slots
//     move: a keyless SCAN through a cluster client reaches one random node and silently
//     returns part of the keys.
//
// The meaning of every script is kernel/fencing.Apply; a differential test runs both on random
// calls and compares replies and keys.
package valkey
