package redistest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
)

// SlotCount is the number of hash slots.
const SlotCount = 16384

// Cluster is N primaries (no replicas) that together own all slots.
type Cluster struct {
	Nodes []*Server
	owner [SlotCount]int // index into Nodes, as this package assigned or moved it
}

// StartCluster starts n ≥ 1 primaries, splits the slots into n contiguous ranges, joins them
// with CLUSTER MEET and waits until every node reports cluster_state:ok, knows every other and
// has heard of every node's (distinct) config epoch.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	bin := Require(t)
	if n < 1 {
		t.Fatalf("redistest: a cluster needs at least one primary (asked for %d)", n)
	}
	dir := t.TempDir()
	c := &Cluster{}
	for range n {
		s, err := start(t, bin, dir, true)
		if err != nil {
			t.Fatalf("redistest: cluster node: %v", err)
		}
		c.Nodes = append(c.Nodes, s)
	}
	ctx := context.Background()
	for i, s := range c.Nodes {
		id, err := s.Do(ctx, "CLUSTER", "MYID").ToString()
		if err != nil {
			t.Fatalf("redistest: CLUSTER MYID on %s: %v", s.Addr, err)
		}
		s.ID = id
		lo, hi := i*SlotCount/n, (i+1)*SlotCount/n-1
		if err := s.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)).Error(); err != nil {
			t.Fatalf("redistest: CLUSTER ADDSLOTSRANGE %d %d on %s: %v", lo, hi, s.Addr, err)
		}
		for slot := lo; slot <= hi; slot++ {
			c.owner[slot] = i
		}
		// Distinct config epochs before the nodes meet, as redis-cli --cluster create sets them.
		// Left at 0, the nodes resolve the collision by bumping epochs over gossip for seconds
		// after start; a bump on a slot's old owner that lands between the two SETSLOT NODE
		// of a move makes its stale claim outrank the new owner, which then drops the moved keys.
		if err := s.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1)).Error(); err != nil {
			t.Fatalf("redistest: CLUSTER SET-CONFIG-EPOCH %d on %s: %v", i+1, s.Addr, err)
		}
	}
	for _, s := range c.Nodes[1:] {
		if err := s.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(c.Nodes[0].Port)).Error(); err != nil {
			t.Fatalf("redistest: CLUSTER MEET from %s: %v", s.Addr, err)
		}
	}
	if err := c.waitOK(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return c
}

// waitOK waits until every node reports cluster_state:ok with all slots served, knows every
// other node, and has heard of the newest config epoch (every cluster_current_epoch equal to
// the largest cluster_my_epoch). The last condition is what makes the next move safe: the new
// owner's SETSLOT NODE bumps its epoch to its current epoch + 1, which then outranks every
// claim of the old owner.
func (c *Cluster) waitOK(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		ok := true
		var current, mine []int
		for _, s := range c.Nodes {
			info, err := s.Do(ctx, "CLUSTER", "INFO").ToString()
			if err != nil {
				ok, last = false, err.Error()
				break
			}
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:16384") ||
				!strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(c.Nodes))+"\r") {
				ok, last = false, s.Addr+": "+info
				break
			}
			current = append(current, infoInt(info, "cluster_current_epoch"))
			mine = append(mine, infoInt(info, "cluster_my_epoch"))
		}
		if ok && (slices.Min(current) != slices.Max(mine) || slices.Max(current) != slices.Max(mine)) {
			ok, last = false, fmt.Sprintf("current epochs %v, config epochs %v", current, mine)
		}
		if ok {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("redistest: cluster not ok after %s; last answer: %s", timeout, last)
}

// infoInt reads field from a CLUSTER INFO reply, -1 when absent or not a number.
func infoInt(info, field string) int {
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
		}
	}
	return -1
}

// Addrs returns the seed addresses for a cluster client.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, s := range c.Nodes {
		out = append(out, s.Addr)
	}
	return out
}

// Client returns a cluster client (follows MOVED/ASK) closed at cleanup.
func (c *Cluster) Client(t testing.TB) valkeygo.Client {
	t.Helper()
	cl, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: c.Addrs(), DisableCache: true})
	if err != nil {
		t.Fatalf("redistest: cluster client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Owner returns the node that owns slot, as assigned at start and changed by MoveSlot.
func (c *Cluster) Owner(slot uint16) *Server { return c.Nodes[c.owner[slot]] }

// MovePhase selects part of a slot move.
type MovePhase uint8

// The phases of a manual reshard of one slot, in order.
const (
	MoveBegin MovePhase = 1 << iota // IMPORTING on the target, MIGRATING on the source
	MoveKeys                        // MIGRATE every key of the slot to the target
	MoveEnd                         // SETSLOT NODE on the target, the source and every other primary
	MoveAll   = MoveBegin | MoveKeys | MoveEnd
)

// MoveSlot moves slot from its owner to Nodes[to], running the phases asked for. Between
// MoveBegin and MoveEnd the source answers ASK for keys it no longer holds and TRYAGAIN for
// multi-key commands whose keys are split.
func (c *Cluster) MoveSlot(ctx context.Context, slot uint16, to int, phases MovePhase) error {
	src, dst := c.Owner(slot), c.Nodes[to]
	if src == dst {
		return fmt.Errorf("redistest: slot %d already on %s", slot, dst.Addr)
	}
	sl := strconv.Itoa(int(slot))
	if phases&MoveBegin != 0 {
		if err := dst.Do(ctx, "CLUSTER", "SETSLOT", sl, "IMPORTING", src.ID).Error(); err != nil {
			return fmt.Errorf("redistest: SETSLOT %s IMPORTING on %s: %w", sl, dst.Addr, err)
		}
		if err := src.Do(ctx, "CLUSTER", "SETSLOT", sl, "MIGRATING", dst.ID).Error(); err != nil {
			return fmt.Errorf("redistest: SETSLOT %s MIGRATING on %s: %w", sl, src.Addr, err)
		}
	}
	if phases&MoveKeys != 0 {
		if err := c.MigrateKeys(ctx, slot, to, nil); err != nil {
			return err
		}
	}
	if phases&MoveEnd != 0 {
		for _, s := range append([]*Server{dst, src}, c.Nodes...) {
			if err := s.Do(ctx, "CLUSTER", "SETSLOT", sl, "NODE", dst.ID).Error(); err != nil {
				return fmt.Errorf("redistest: SETSLOT %s NODE on %s: %w", sl, s.Addr, err)
			}
		}
		c.owner[slot] = to
		if err := c.waitOK(ctx, 30*time.Second); err != nil {
			return fmt.Errorf("redistest: after moving slot %s: %w", sl, err)
		}
	}
	return nil
}

// MigrateKeys moves keys of slot from its owner to Nodes[to] with MIGRATE: the listed keys,
// or every key of the slot when keys is nil. The slot must be in the begun state.
func (c *Cluster) MigrateKeys(ctx context.Context, slot uint16, to int, keys []string) error {
	src, dst := c.Owner(slot), c.Nodes[to]
	for {
		batch := keys
		if batch == nil {
			var err error
			batch, err = src.Do(ctx, "CLUSTER", "GETKEYSINSLOT", strconv.Itoa(int(slot)), "100").AsStrSlice()
			if err != nil {
				return fmt.Errorf("redistest: GETKEYSINSLOT %d on %s: %w", slot, src.Addr, err)
			}
			if len(batch) == 0 {
				return nil
			}
		}
		args := append([]string{"MIGRATE", "127.0.0.1", strconv.Itoa(dst.Port), "", "0", "5000", "KEYS"}, batch...)
		if err := src.Do(ctx, args...).Error(); err != nil && !valkeygo.IsValkeyNil(err) {
			return fmt.Errorf("redistest: MIGRATE %d keys of slot %d to %s: %w", len(batch), slot, dst.Addr, err)
		}
		if keys != nil {
			return nil
		}
	}
}

// Primary returns the index of s in Nodes.
func (c *Cluster) Primary(s *Server) int { return slices.Index(c.Nodes, s) }
