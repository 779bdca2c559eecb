package shardmap

import (
	"fmt"
	"slices"

	"loam.dev/router/kernel/keyrange"
)

// Record is the shard map of one database.
type Record struct {
	// Version is the CAS version: the store sets it, and every write increments it.
	Version uint64
	// Generation is the routing generation: it increments whenever routing changes.
	Generation uint64
	Engine     Engine
	Router     Router
	// Layout is how the database is sharded now, at Generation.
	Layout
	State State
	// Target is the layout a reshard is moving to. It is set while State.Phase is
	// Resharding or CuttingOver and nil otherwise. Routers render it as the reshard
	// destination database (<db>__reshard_<g>), unused by clients until cutover.
	Target *Layout
}

// Layout is a sharding scheme with its ordered shards. Index i in Shards is PgDog's
// `shard = i` and the i-th key range of a Vitess keyspace.
type Layout struct {
	Scheme Scheme
	Shards []Shard
}

// Engine is the database engine behind the shards.
type Engine uint8

const (
	Postgres Engine = iota + 1
	MySQL
)

// RouterKind says which router serves the database.
type RouterKind uint8

const (
	// PgDog routes a Postgres database; Router.Name is the PgDog database name.
	PgDog RouterKind = iota + 1
	// Vitess routes a MySQL keyspace; Router.Name is the keyspace.
	Vitess
)

// Router names the logical database clients connect to.
type Router struct {
	Kind RouterKind
	Name string
}

// Shard is one entry of a layout.
type Shard struct {
	// Name is unique within the layout. For a Vitess keyspace it is the key range ("-80").
	Name    string
	Backend Backend
	Fence   Fence
}

// Backend is where a shard's data lives: its primary, and replicas for reads.
type Backend struct {
	Host     string
	Port     uint16
	Database string // the database name on the server (PgDog's database_name)
	// Replicas are read-only endpoints of the same data (PgDog role = "replica").
	Replicas []Endpoint
	// Tablet is the Vitess tablet alias of the primary ("zone1-0000000100"), used when
	// repointing a shard after a failover; empty for PgDog databases.
	Tablet string
}

// Endpoint is a host and port.
type Endpoint struct {
	Host string
	Port uint16
}

func (e Endpoint) String() string { return fmt.Sprintf("%s:%d", e.Host, e.Port) }

// Fence is whether a shard's backend accepts router writes (see the cutover machine: the
// fence is enforced in the backend, so a router that missed the cutover cannot write).
type Fence uint8

const (
	// FenceOpen: the application role can log in and write.
	FenceOpen Fence = iota + 1
	// FenceWrites: the application role is refused (NOLOGIN and its sessions ended).
	FenceWrites
)

// Phase is where the database is in its life.
type Phase uint8

const (
	Serving Phase = iota + 1
	// Resharding: a copy towards Target is running; State.To is the generation the
	// target will be published as.
	Resharding
	// CuttingOver: the cutover machine is at State.Step.
	CuttingOver
	// Fenced: writes are refused on every shard (an operator's stop, or a failed reverse).
	Fenced
)

// State is the phase and its data.
type State struct {
	Phase Phase
	To    uint64      // Resharding and CuttingOver: the generation Target will get
	Step  CutoverStep // CuttingOver only
}

// CutoverStep names the steps of the fenced cutover (§6.4 of the design).
type CutoverStep uint8

const (
	StepCopy CutoverStep = iota + 1
	StepPause
	StepFence
	StepCutover
	StepPublish
	StepResume
	StepFinalize
)

// Scheme is how a key picks its shard: one of PgHash, PgRange, PgList or Vindex.
type Scheme interface {
	// ShardKey returns the sharding key column, its type and the tables it applies to.
	ShardKey() Key
	isScheme()
}

// Key is the sharding key of a scheme.
type Key struct {
	Column string
	Type   KeyType
	// Tables the key applies to; empty means every table that has the column (PgDog's
	// sharded_tables entry without a name).
	Tables []string
}

// KeyType is the SQL type of the sharding key; it decides the hash function.
type KeyType uint8

const (
	Bigint  KeyType = iota + 1 // int8 (int2 and int4 keys hash the same as their int8 value)
	Integer                    // int4
	Text                       // text / varchar, deterministic collation, UTF-8
	UUID
)

// PgHash is PgDog's default sharding: Postgres's hash partitioning, shard = the partition
// remainder for modulus Shards.
type PgHash struct {
	Key    Key
	Shards uint32
}

// PgRange maps ranges of key values to shards (PgDog sharded_tables mapping, range rules).
type PgRange struct {
	Key    Key
	Ranges []RangeRule
	// Default, when set, takes every key no rule holds; without it the rules must cover
	// every value with no gap.
	Default *uint32
}

// RangeRule holds the keys in [Start, End); a nil bound is unbounded.
type RangeRule struct {
	Start, End *Value
	Shard      uint32
}

// PgList maps listed key values to shards (PgDog sharded_tables mapping, list rules).
type PgList struct {
	Key     Key
	Lists   []ListRule
	Default *uint32
}

// ListRule sends the listed values to Shard.
type ListRule struct {
	Values []Value
	Shard  uint32
}

// Vindex is a Vitess primary vindex with the keyspace-ID range of each shard, in order.
type Vindex struct {
	Key    Key
	Kind   VindexKind
	Ranges []keyrange.Range
}

// VindexKind is the Vitess vindex type.
type VindexKind uint8

const (
	VindexHash   VindexKind = iota + 1 // "hash": DES of the 64-bit value
	VindexXXHash                       // "xxhash": xxhash64 of the bytes
)

func (s PgHash) ShardKey() Key  { return s.Key }
func (s PgRange) ShardKey() Key { return s.Key }
func (s PgList) ShardKey() Key  { return s.Key }
func (s Vindex) ShardKey() Key  { return s.Key }

func (PgHash) isScheme()  {}
func (PgRange) isScheme() {}
func (PgList) isScheme()  {}
func (Vindex) isScheme()  {}

// Clone returns a deep copy, so a machine can keep a record without aliasing the caller's.
func (r *Record) Clone() *Record {
	if r == nil {
		return nil
	}
	c := *r
	c.Layout = r.Layout.Clone()
	if r.Target != nil {
		t := r.Target.Clone()
		c.Target = &t
	}
	return &c
}

// Clone returns a deep copy of the layout.
func (l Layout) Clone() Layout {
	c := Layout{Scheme: cloneScheme(l.Scheme)}
	if l.Shards != nil {
		c.Shards = make([]Shard, len(l.Shards))
		for i, s := range l.Shards {
			s.Backend.Replicas = slices.Clone(s.Backend.Replicas)
			c.Shards[i] = s
		}
	}
	return c
}

func cloneKey(k Key) Key { k.Tables = slices.Clone(k.Tables); return k }

func cloneU32(p *uint32) *uint32 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func cloneValue(p *Value) *Value {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func cloneScheme(s Scheme) Scheme {
	switch s := s.(type) {
	case PgHash:
		s.Key = cloneKey(s.Key)
		return s
	case PgRange:
		s.Key = cloneKey(s.Key)
		s.Default = cloneU32(s.Default)
		if s.Ranges != nil {
			rs := make([]RangeRule, len(s.Ranges))
			for i, r := range s.Ranges {
				rs[i] = RangeRule{Start: cloneValue(r.Start), End: cloneValue(r.End), Shard: r.Shard}
			}
			s.Ranges = rs
		}
		return s
	case PgList:
		s.Key = cloneKey(s.Key)
		s.Default = cloneU32(s.Default)
		if s.Lists != nil {
			ls := make([]ListRule, len(s.Lists))
			for i, l := range s.Lists {
				ls[i] = ListRule{Values: slices.Clone(l.Values), Shard: l.Shard}
			}
			s.Lists = ls
		}
		return s
	case Vindex:
		s.Key = cloneKey(s.Key)
		s.Ranges = slices.Clone(s.Ranges)
		return s
	}
	return s
}
