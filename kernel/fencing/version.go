package fencing

import "fmt"

// Version is a script version of the migration, in rollout order.
type Version uint8

// The script versions. Their order is the rollout order: a fleet spans at most two adjacent
// versions (see loam.dev/router/machine/fencemigrate).
const (
	O Version = iota // legacy: old keys only
	A                // union check, lease on the old key, generation to both counters
	B                // union check, lease on the new key, generation to the new counter
	C                // new keys only: the first version that can run on a cluster
)

// Versions lists every version in rollout order.
var Versions = []Version{O, A, B, C}

func (v Version) String() string {
	switch v {
	case O:
		return "O"
	case A:
		return "A"
	case B:
		return "B"
	case C:
		return "C"
	}
	return fmt.Sprintf("Version(%d)", uint8(v))
}

// ParseVersion reads "O", "A", "B" or "C".
func ParseVersion(s string) (Version, error) {
	for _, v := range Versions {
		if v.String() == s {
			return v, nil
		}
	}
	return 0, fmt.Errorf("fencing: unknown script version %q (want O, A, B or C)", s)
}

// Reads reports whether version v may read or act on leases of keyspace sp.
func (v Version) Reads(sp Keyspace) bool {
	switch v {
	case O:
		return sp == Old
	case C:
		return sp == New
	}
	return v == A || v == B
}

// Writes returns the keyspace in which v's acquire writes the lease.
func (v Version) Writes() Keyspace {
	if v >= B {
		return New
	}
	return Old
}

// Keyspace says which of a session's two key pairs a lease lives in.
type Keyspace uint8

// The keyspaces: Old is the legacy pair, New the hash-tagged pair.
const (
	Old Keyspace = iota
	New
)

func (sp Keyspace) String() string {
	if sp == New {
		return "new"
	}
	return "old"
}

// ParseKeyspace reads "old" or "new".
func ParseKeyspace(s string) (Keyspace, error) {
	switch s {
	case "old":
		return Old, nil
	case "new":
		return New, nil
	}
	return 0, fmt.Errorf("fencing: unknown keyspace %q (want old or new)", s)
}
