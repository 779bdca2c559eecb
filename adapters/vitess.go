package adapters

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"loam.dev/router/kernel/keyrange"
)

// VitessControl is the part of vtctld's API that Loam's machines drive: make Vitess take a
// promoted tablet as its shard's primary (the failover's Reparent, §9.1), read the serving
// partitions that the shard map record mirrors (§6.1), and apply the VSchema rendered from
// the record. The gRPC implementation is adapters/vtctld, which speaks vtctld's protocol
// without Vitess's generated code, so that this module never depends on Vitess's module.
//
// Errors are *VitessError, keeping the gRPC status code; errors.Is matches ErrUnreachable
// (vtctld did not answer in time, or could not be reached), ErrNotFound, and ErrWrongShard.
type VitessControl interface {
	// TabletExternallyReparented makes tablet (an alias, "zone1-0000000100") the primary
	// of keyspace/shard in Vitess's topology: vtctldclient TabletExternallyReparented.
	// The tablet was promoted outside Vitess; Vitess only records it. The implementation
	// checks first that the tablet belongs to keyspace/shard and returns an error
	// matching ErrWrongShard, without reparenting anything, when it does not: a wrong
	// alias would otherwise make a tablet of another shard its primary. It then checks
	// that the tablet's MySQL is writable and returns an error matching ErrNotWritable,
	// telling vtctld nothing, when it is not. Idempotent: a tablet that is already the
	// primary is left as it is, but success always means the writability check passed,
	// so an earlier call that failed half-way cannot make a later one look done.
	TabletExternallyReparented(ctx context.Context, keyspace, shard, tablet string) (Reparented, error)
	// SrvKeyspace returns the serving partitions of keyspace in cell (GetSrvKeyspaces),
	// one per tablet type, each listing the shards that serve it, in Vitess's order.
	SrvKeyspace(ctx context.Context, keyspace, cell string) ([]SrvPartition, error)
	// ApplyVSchema replaces keyspace's VSchema with vschema, the JSON form of
	// vschema.Keyspace (kernel/render's VSchema output), and rebuilds the serving VSchema.
	// Unknown fields and unknown vindex parameters are errors: Loam renders every field
	// it sends, so an unknown one is a bug to report, not to drop.
	ApplyVSchema(ctx context.Context, keyspace string, vschema []byte) error
}

// Reparented is vtctld's answer to TabletExternallyReparented.
type Reparented struct {
	Keyspace, Shard string
	// NewPrimary is the tablet now primary; OldPrimary the one before ("" when the shard
	// had none).
	NewPrimary, OldPrimary string
}

// SrvPartition is one partition of a keyspace's serving graph: the shards that serve one
// tablet type.
type SrvPartition struct {
	Type   TabletType
	Shards []SrvShard
}

// SrvShard is one shard of a serving partition.
type SrvShard struct {
	Name  string
	Range keyrange.Range
}

// Serving returns the shards that serve type t, or nil when no partition does.
func Serving(parts []SrvPartition, t TabletType) []SrvShard {
	for _, p := range parts {
		if p.Type == t {
			return p.Shards
		}
	}
	return nil
}

// TabletType is a Vitess tablet type; the values are topodata.TabletType's.
type TabletType int32

const (
	TabletPrimary TabletType = 1
	TabletReplica TabletType = 2
	TabletRdonly  TabletType = 3
)

func (t TabletType) String() string {
	switch t {
	case TabletPrimary:
		return "PRIMARY"
	case TabletReplica:
		return "REPLICA"
	case TabletRdonly:
		return "RDONLY"
	}
	return "TabletType(" + strconv.Itoa(int(t)) + ")"
}

// TabletAlias names a tablet: its cell and its uid within the cell.
type TabletAlias struct {
	Cell string
	UID  uint32
}

// String is the alias's text form, "<cell>-<uid as 10 digits>" ("zone1-0000000100").
func (a TabletAlias) String() string { return fmt.Sprintf("%s-%010d", a.Cell, a.UID) }

// ParseTabletAlias reads "<cell>-<uid>" as Vitess does: the uid is the decimal digits after
// the last '-' (at most 2^32-1, leading zeros allowed), the cell everything before it, made
// of letters, digits, '-', '_' and '.'.
func ParseTabletAlias(s string) (TabletAlias, error) {
	i := strings.LastIndexByte(s, '-')
	if i <= 0 || i == len(s)-1 {
		return TabletAlias{}, fmt.Errorf("adapters: tablet alias %q: want <cell>-<uid>, e.g. zone1-0000000100", s)
	}
	cell, digits := s[:i], s[i+1:]
	for _, c := range []byte(cell) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return TabletAlias{}, fmt.Errorf("adapters: tablet alias %q: cell %q may hold only letters, digits, '-', '_' and '.'", s, cell)
		}
	}
	for _, c := range []byte(digits) {
		if c < '0' || c > '9' {
			return TabletAlias{}, fmt.Errorf("adapters: tablet alias %q: uid %q is not a decimal number", s, digits)
		}
	}
	uid, err := strconv.ParseUint(digits, 10, 32)
	if err != nil {
		return TabletAlias{}, fmt.Errorf("adapters: tablet alias %q: uid %q does not fit in 32 bits", s, digits)
	}
	return TabletAlias{Cell: cell, UID: uint32(uid)}, nil
}

// ErrWrongShard: the tablet named for a reparent does not belong to the shard named with it.
var ErrWrongShard = errors.New("adapters: the tablet belongs to another shard")

// ErrNotWritable: the tablet named for a reparent sits in front of a MySQL server that is
// still read-only, so the promotion outside Vitess has not finished. vtctld must not be told
// yet: its ChangeType to PRIMARY fails on such a server (errno 1290, checked on v0.24.4 with
// MariaDB) after writing PRIMARY into the tablet's topology record, and every later
// TabletExternallyReparented then answers "already primary" without doing anything.
var ErrNotWritable = errors.New("adapters: the promoted tablet's MySQL is read-only")

// VitessError is an error of a vtctld call, keeping the gRPC status code.
type VitessError struct {
	Op       string // the vtctld RPC, e.g. "TabletExternallyReparented"
	Addr     string // vtctld's gRPC address
	Keyspace string
	Shard    string // "" when the call is not about one shard
	Tablet   string // "" when the call names no tablet
	// Code is the gRPC status code's name ("Unavailable", "NotFound", ...); "" when the
	// error arose before any call.
	Code string
	// Fix says what to do about it.
	Fix string
	Err error
}

func (e *VitessError) Error() string {
	var b strings.Builder
	b.WriteString("vtctld ")
	if e.Addr != "" {
		b.WriteString(e.Addr + " ")
	}
	b.WriteString(e.Op + " keyspace=" + e.Keyspace)
	if e.Shard != "" {
		b.WriteString(" shard=" + e.Shard)
	}
	if e.Tablet != "" {
		b.WriteString(" tablet=" + e.Tablet)
	}
	if e.Code != "" {
		b.WriteString(" [" + e.Code + "]")
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	if e.Fix != "" {
		b.WriteString(" (" + e.Fix + ")")
	}
	return b.String()
}

func (e *VitessError) Unwrap() error { return e.Err }

// Is matches ErrUnreachable for the codes that mean vtctld did not (or not in time)
// answer, and ErrNotFound for NotFound.
func (e *VitessError) Is(target error) bool {
	switch target {
	case ErrUnreachable:
		return e.Code == "Unavailable" || e.Code == "DeadlineExceeded"
	case ErrNotFound:
		return e.Code == "NotFound"
	}
	return false
}
