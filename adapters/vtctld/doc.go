// Package vtctld implements adapters.VitessControl over vtctld's gRPC API: the Vtctld
// service of vitess.io/vitess v0.24.4 (proto/vtctlservice.proto).
//
// It speaks that service without Vitess's generated code: the few messages it sends and
// reads are encoded in protobuf's wire format here (wire.go), with the field numbers of
// Vitess's .proto files, so that loam.dev/router needs no Vitess module (Vitess requires
// go 1.26.8 and carries an exclude directive that every importer would have to repeat).
// A program that imports loam.dev/router gets this client with nothing else to require.
// Its tests run every call against a real vtctld, with real tablets on MariaDB
// (conformance/vitesstest), which decodes what this package encodes with Vitess's own code.
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
