package fencing

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Lease is the authority a granted acquire hands out: who holds it, with which fencing
// generation, and in which keyspace the lease key lives. Renew, release and validate name it.
type Lease struct {
	Space Keyspace
	Owner string
	Gen   uint64
}

// Value is the lease key's stored value, "<owner>:<generation>", as the Lua scripts write it.
func (l Lease) Value() string { return l.Owner + ":" + strconv.FormatUint(l.Gen, 10) }

func (l Lease) String() string { return l.Space.String() + "/" + l.Value() }

// ErrCorrupt is wrapped when a stored value is not what the scripts write.
var ErrCorrupt = errors.New("fencing: stored value is not one the scripts write")

// ParseLease reads a lease key's value. The generation follows the last ":", so owners may
// contain ":".
func ParseLease(sp Keyspace, v string) (Lease, error) {
	i := strings.LastIndexByte(v, ':')
	if i <= 0 {
		return Lease{}, fmt.Errorf("%w: lease value %q is not <owner>:<generation>", ErrCorrupt, v)
	}
	g, err := strconv.ParseUint(v[i+1:], 10, 64)
	if err != nil {
		return Lease{}, fmt.Errorf("%w: lease value %q: generation: %v", ErrCorrupt, v, err)
	}
	return Lease{Space: sp, Owner: v[:i], Gen: g}, nil
}

// MaxGeneration bounds generations: the Lua scripts compute max(old, new)+1 with Lua numbers
// (doubles), exact up to 2^53.
const MaxGeneration = 1 << 53

func parseCounter(key, v string) (uint64, error) {
	g, err := strconv.ParseUint(v, 10, 64)
	if err != nil || g > MaxGeneration {
		return 0, fmt.Errorf("%w: generation counter %s = %q is not a decimal below 2^53", ErrCorrupt, key, v)
	}
	return g, nil
}
