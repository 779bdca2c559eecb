package model

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"loam.dev/router/adapters"
	"loam.dev/router/detsim"
)

// ErrVtctldUnavailable is the vtctld.reparent.fail fault: vtctld answered Unavailable.
var ErrVtctldUnavailable = errors.New("model: vtctld unavailable (injected topology server timeout)")

// Vtctld is Vitess's control plane for one keyspace as the failover sees it: the tablets it
// knows (alias, shard, and the MySQL server behind each) and, per shard, the tablet Vitess
// takes as primary. TabletExternallyReparented behaves as adapters.VitessControl promises
// (and as the vtctld adapter implements it): an unknown tablet is ErrNotFound, a tablet of
// another shard ErrWrongShard with nothing reparented, a tablet whose MySQL is read-only
// ErrNotWritable with nothing reparented, a tablet that already is the primary
// is left as it is. vtgates learn a reparent from it (see VTGate).
//
// What is simplified: one cell; tablets do not change type or health by themselves; the
// old primary's tablet is not demoted (an unmanaged tablet's MySQL is Loam's to fence, which
// is what the failover does first); the topology is vtctld's memory, which survives the
// network faults the simulator injects.
type Vtctld struct {
	s        *detsim.Sim
	Node     detsim.NodeID
	Keyspace string
	tablets  map[string]Tablet
	primary  map[string]string
	gates    []*VTGate
	// Reparents is every change of a shard's primary, in order, for the checkers.
	Reparents []Reparent
}

// Tablet is one tablet: its alias, its shard and the backend (MySQL server) behind it.
// ReadOnly says the MySQL is still read-only (a promotion outside Vitess not finished):
// TabletExternallyReparented refuses the tablet with adapters.ErrNotWritable, as the
// adapter does, until SetWritable.
type Tablet struct {
	Alias, Shard, Backend string
	ReadOnly              bool
}

// SetWritable makes tablet's MySQL writable (what finishing the promotion does).
func (v *Vtctld) SetWritable(tablet string) {
	if t, ok := v.tablets[tablet]; ok {
		t.ReadOnly = false
		v.tablets[tablet] = t
	}
}

// Reparent is one change of a shard's primary; Step orders it within a millisecond.
type Reparent struct {
	T        int64
	Step     int
	Shard    string
	Old, New string
}

// NewVtctld adds the vtctld node for keyspace.
func NewVtctld(s *detsim.Sim, name, keyspace string) *Vtctld {
	v := &Vtctld{s: s, Keyspace: keyspace, tablets: map[string]Tablet{}, primary: map[string]string{}}
	if s != nil {
		v.Node = s.Net.AddNode(name)
	}
	return v
}

// AddTablet registers a tablet; primary makes it its shard's primary.
func (v *Vtctld) AddTablet(t Tablet, primary bool) {
	v.tablets[t.Alias] = t
	if primary {
		v.primary[t.Shard] = t.Alias
		v.Reparents = append(v.Reparents, Reparent{Shard: t.Shard, New: t.Alias})
	}
}

func (v *Vtctld) err(shard, tablet, code string, err error) error {
	return &adapters.VitessError{Op: "TabletExternallyReparented", Keyspace: v.Keyspace, Shard: shard, Tablet: tablet, Code: code, Err: err}
}

// TabletExternallyReparented makes tablet the primary of keyspace/shard. Fault
// vtctld.reparent.fail answers Unavailable without reparenting.
func (v *Vtctld) TabletExternallyReparented(keyspace, shard, tablet string) (adapters.Reparented, error) {
	if v.s != nil && v.s.Fault("vtctld.reparent.fail") {
		return adapters.Reparented{}, v.err(shard, tablet, "Unavailable", ErrVtctldUnavailable)
	}
	t, ok := v.tablets[tablet]
	if !ok || keyspace != v.Keyspace {
		return adapters.Reparented{}, v.err(shard, tablet, "NotFound", fmt.Errorf("%w: vtctld lists no tablet %s in keyspace %s", adapters.ErrNotFound, tablet, keyspace))
	}
	if t.Shard != shard {
		return adapters.Reparented{}, v.err(shard, tablet, "", fmt.Errorf("%w: tablet %s serves %s/%s", adapters.ErrWrongShard, tablet, keyspace, t.Shard))
	}
	if t.ReadOnly {
		return adapters.Reparented{}, v.err(shard, tablet, "", fmt.Errorf("%w: @@global.read_only is 1 on %s", adapters.ErrNotWritable, tablet))
	}
	old := v.primary[shard]
	out := adapters.Reparented{Keyspace: keyspace, Shard: shard, NewPrimary: tablet, OldPrimary: old}
	if old == tablet {
		return out, nil
	}
	v.primary[shard] = tablet
	var now int64
	var step int
	if v.s != nil {
		now, step = v.s.Now(), v.s.Steps()
	}
	v.Reparents = append(v.Reparents, Reparent{T: now, Step: step, Shard: shard, Old: old, New: tablet})
	for _, g := range v.gates {
		g.notify()
	}
	return out, nil
}

// Primary returns the alias of shard's primary tablet ("" when it has none).
func (v *Vtctld) Primary(shard string) string { return v.primary[shard] }

// WasPrimary reports whether Vitess has made tablet shard's primary at some point so far.
func (v *Vtctld) WasPrimary(shard, tablet string) bool {
	return slices.ContainsFunc(v.Reparents, func(r Reparent) bool { return r.Shard == shard && r.New == tablet })
}

// primaries returns shard → backend of its primary.
func (v *Vtctld) primaries() map[string]string {
	out := make(map[string]string, len(v.primary))
	for sh, a := range v.primary {
		out[sh] = v.tablets[a].Backend
	}
	return out
}

// VTGate is one vtgate routing a keyspace's queries by Vitess's topology: it keeps, per
// shard, the backend of the primary as of its last refresh from vtctld and runs each
// transaction there. It learns a reparent from a message vtctld sends (which the network
// may lose or delay) and from a full refresh every RefreshEvery ms, as vtgate's
// healthcheck and keyspace watch do.
type VTGate struct {
	s       *detsim.Sim
	ID      string
	Node    detsim.NodeID
	Role    string
	vtctld  *Vtctld
	dir     Directory
	shards  []string
	view    map[string]string
	version int // of the topology the view is from
	sess    map[string]uint64
	// RefreshEvery is the full refresh's period, ms.
	RefreshEvery int64
}

// NewVTGate adds a vtgate for the vtctld's keyspace; shards lists the keyspace's shards in
// routing order (a key goes to shards[Route(key, len(shards))]).
func NewVTGate(s *detsim.Sim, id, role string, vtctld *Vtctld, dir Directory, shards []string, refreshEvery int64) *VTGate {
	g := &VTGate{s: s, ID: id, Role: role, vtctld: vtctld, dir: dir, shards: slices.Clone(shards),
		view: vtctld.primaries(), version: len(vtctld.Reparents), sess: map[string]uint64{}, RefreshEvery: refreshEvery}
	g.Node = s.Net.AddNode(id)
	vtctld.gates = append(vtctld.gates, g)
	var tick func()
	tick = func() {
		g.notify()
		s.After(g.RefreshEvery, detsim.Label{Kind: "refresh", To: g.ID}, tick)
	}
	s.After(refreshEvery, detsim.Label{Kind: "refresh", To: g.ID}, tick)
	return g
}

// notify sends the gate vtctld's primaries now; the gate takes them when they arrive,
// unless it already has a newer topology (messages overtake each other; the topology's
// version orders them, as the topo server's watch does).
func (g *VTGate) notify() {
	v := g.vtctld
	view, version := v.primaries(), len(v.Reparents)
	g.s.Net.Call(v.Node, g.Node, "topology", detsim.Idempotent,
		func(rep detsim.Reply) {
			if version >= g.version {
				g.view, g.version = view, version
			}
			rep(nil, nil)
		},
		func(any, error) {})
}

// Routes returns the backend the gate sends shard's queries to now.
func (g *VTGate) Routes(shard string) string { return g.view[shard] }

// View returns the gate's shard → backend map, for checkers.
func (g *VTGate) View() map[string]string { return maps.Clone(g.view) }

// Query runs a single-shard transaction on the primary of the shard of its first key, in
// the gate's session there.
func (g *VTGate) Query(txn Txn, reply detsim.Reply) {
	shard := g.shards[Route(txn.Ops[0].Key, len(g.shards))]
	name := g.view[shard]
	b := g.dir[name]
	if b == nil {
		reply(nil, &adapters.RouterError{Instance: g.ID, Op: "Query", Code: "UNAVAILABLE", Err: fmt.Errorf("no primary tablet for shard %s", shard)})
		return
	}
	sess := g.sess[name]
	g.s.Net.Call(g.Node, b.Node, "exec "+strconv.FormatInt(txn.ID, 10), 0, func(rep detsim.Reply) {
		reads, next, err := b.Exec(g.Role, sess, g.ID, txn)
		rep(execReply{reads, next}, err)
	}, func(v any, err error) {
		if err != nil {
			delete(g.sess, name)
			reply(nil, err)
			return
		}
		x := v.(execReply)
		g.sess[name] = x.sess
		reply(x.reads, nil)
	})
}
