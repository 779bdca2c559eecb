package shardmap

import (
	"fmt"

	"loam.dev/router/kernel/keyrange"
)

// NewPgHash returns a serving record at generation 1 for a PgDog database hash-sharded on
// key across the given backends, in order (shard i is backends[i], named "s<i>"). The
// record still has to pass Validate; the store sets Version.
func NewPgHash(database string, key Key, backends ...Backend) *Record {
	r := &Record{
		Generation: 1, Engine: Postgres, Router: Router{Kind: PgDog, Name: database},
		Layout: Layout{Scheme: PgHash{Key: key, Shards: uint32(len(backends))}},
		State:  State{Phase: Serving},
	}
	for i, b := range backends {
		r.Shards = append(r.Shards, Shard{Name: fmt.Sprintf("s%d", i), Backend: b, Fence: FenceOpen})
	}
	return r
}

// NewVindex returns a serving record at generation 1 for a Vitess keyspace whose keyspace-ID
// space is split evenly across the given backends (shards named by their ranges, as
// Vitess names them: 2 backends give "-80" and "80-").
func NewVindex(keyspace string, key Key, kind VindexKind, backends ...Backend) (*Record, error) {
	ranges, err := keyrange.Split(keyrange.Full(), len(backends))
	if err != nil {
		return nil, fmt.Errorf("shardmap: %w", err)
	}
	r := &Record{
		Generation: 1, Engine: MySQL, Router: Router{Kind: Vitess, Name: keyspace},
		Layout: Layout{Scheme: Vindex{Key: key, Kind: kind, Ranges: ranges}},
		State:  State{Phase: Serving},
	}
	for i, b := range backends {
		r.Shards = append(r.Shards, Shard{Name: ranges[i].String(), Backend: b, Fence: FenceOpen})
	}
	return r, nil
}
