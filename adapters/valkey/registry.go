package valkey

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
)

// Registry is the mesh's ready registry as a scored-expiry index: a heartbeat writes the
// runtime's record with a TTL and adds the runtime to one sorted set scored by the record's
// expiry; discovery reads the members whose score is still in the future and fetches their
// records. It replaces SCAN MATCH mesh:ready:*, which on a cluster is routed to one random
// node and silently returns part of the peers.
//
// The index is one key, so one slot: discovery is one command on one node, complete by
// construction. Entries are hints (the fenced directory arbitrates ownership): a member whose
// record has gone is skipped, and dead scores are pruned on the way.
type Registry struct {
	client valkeygo.Client
	// Index is the sorted set's key.
	Index string
	// Prefix is prepended to a runtime id to name its record key.
	Prefix string
	// Now is the clock scores are written and compared with (milliseconds since the epoch).
	// Runtimes' clocks must agree to well within a TTL; nil means time.Now.
	Now func() time.Time
}

// NewRegistry returns a registry with the seed's record keys (mesh:ready:<id>) and the index
// mesh:ready-index (outside the old SCAN pattern, so a legacy reader never takes it for a peer).
func NewRegistry(c valkeygo.Client) *Registry {
	return &Registry{client: c, Index: "mesh:ready-index", Prefix: "mesh:ready:"}
}

func (r *Registry) now() int64 {
	if r.Now == nil {
		return time.Now().UnixMilli()
	}
	return r.Now().UnixMilli()
}

// Peer is a discovered runtime and its record.
type Peer struct {
	ID     string
	Record string
}

// Heartbeat publishes id's record for ttl and scores it in the index by its expiry. The two
// writes go to different slots (record keys are spread; the index is one key) and are not
// atomic: the record is written first, so an indexed id normally has a record.
func (r *Registry) Heartbeat(ctx context.Context, id, record string, ttl time.Duration) error {
	if id == "" || ttl <= 0 {
		return fmt.Errorf("valkey: heartbeat needs an id and a positive ttl (id %q, ttl %s)", id, ttl)
	}
	c := r.client
	exp := r.now() + ttl.Milliseconds()
	res := c.DoMulti(ctx,
		c.B().Set().Key(r.Prefix+id).Value(record).Px(ttl).Build(),
		c.B().Zadd().Key(r.Index).ScoreMember().ScoreMember(float64(exp), id).Build())
	for _, x := range res {
		if err := x.Error(); err != nil {
			return wrap("heartbeat "+id, err)
		}
	}
	return nil
}

// Discover returns the live runtimes with their records, sorted by id, and prunes dead scores.
func (r *Registry) Discover(ctx context.Context) ([]Peer, error) {
	c := r.client
	now := r.now()
	ids, err := c.Do(ctx, c.B().Zrangebyscore().Key(r.Index).Min("("+strconv.FormatInt(now, 10)).Max("+inf").Build()).AsStrSlice()
	if err != nil {
		return nil, wrap("discover", err)
	}
	slices.Sort(ids)
	cmds := make(valkeygo.Commands, 0, len(ids))
	for _, id := range ids {
		cmds = append(cmds, c.B().Get().Key(r.Prefix+id).Build())
	}
	var peers []Peer
	for i, res := range c.DoMulti(ctx, cmds...) { // each GET routed to its own slot's node
		rec, err := res.ToString()
		if valkeygo.IsValkeyNil(err) {
			continue // record expired or never written: a stale hint, skipped
		}
		if err != nil {
			return nil, wrap("read record of "+ids[i], err)
		}
		peers = append(peers, Peer{ID: ids[i], Record: rec})
	}
	if _, err := r.prune(ctx, now); err != nil {
		return peers, err
	}
	return peers, nil
}

// Prune removes index members whose expiry has passed; it returns how many.
func (r *Registry) Prune(ctx context.Context) (int64, error) { return r.prune(ctx, r.now()) }

func (r *Registry) prune(ctx context.Context, now int64) (int64, error) {
	c := r.client
	n, err := c.Do(ctx, c.B().Zremrangebyscore().Key(r.Index).Min("-inf").Max(strconv.FormatInt(now, 10)).Build()).AsInt64()
	return n, wrap("prune", err)
}

// Remove takes a runtime out at once (clean shutdown).
func (r *Registry) Remove(ctx context.Context, id string) error {
	c := r.client
	for _, x := range c.DoMulti(ctx, c.B().Zrem().Key(r.Index).Member(id).Build(), c.B().Del().Key(r.Prefix+id).Build()) {
		if err := x.Error(); err != nil {
			return wrap("remove "+id, err)
		}
	}
	return nil
}
