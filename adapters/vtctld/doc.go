// Package vtctld implements adapters.VitessControl over vtctld's gRPC API: the Vtctld
// service of vitess.io/vitess v0.24.4 (vtctlservice), through Vitess's own generated
// client. It is a module of its own (loam.dev/router/adapters/vtctld) so that
// loam.dev/router never depends on Vitess's protos; a program that talks to Vitess imports
// both.
//
// Three calls are used:
//
//   - TabletExternallyReparented, after a GetTablets of the alias that checks the tablet
//     belongs to the shard named with it: a tablet of another shard is refused
//     (adapters.ErrWrongShard) before anything changes.
//   - GetSrvKeyspaces for one cell, turned into serving partitions with kernel/keyrange
//     ranges, for the shard map record to mirror.
//   - ApplyVSchema of kernel/render's VSchema JSON, decoded strictly (an unknown field is an
//     error here, where vtctldclient would drop it) and applied with strict set, so an
//     unknown vindex parameter is an error too.
//
// Every call runs under the caller's context and at most Config.Timeout. Errors are
// *adapters.VitessError: the RPC, the keyspace, shard and tablet, the gRPC status code,
// and what to do.
package vtctld
