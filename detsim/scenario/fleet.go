package scenario

import (
	"errors"
	"fmt"
	"hash"
	"strconv"

	"loam.dev/router/adapters"
	"loam.dev/router/detsim"
	"loam.dev/router/detsim/check"
	"loam.dev/router/detsim/model"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine"
)

// The names every scenario uses.
const (
	db      = "app"
	appRole = "app"
	// monitorID is the in-doubt monitor's name in resolution histories.
	monitorID = "indoubt-monitor"
)

var dbRef = adapters.DBRef{Namespace: "ns", Database: db}

// fleet is the simulated world the scenarios share: backends, the files target, the store,
// router instances and clients, with the client history.
type fleet struct {
	s       *detsim.Sim
	dir     model.Directory
	order   []*model.Backend // every backend, in creation order
	files   *model.Files
	store   *model.Store
	routers []*model.Router
	clients []detsim.NodeID
	hist    *check.History
	// storeNode serves the store; operatorNode is where an operator's tool runs.
	storeNode, operatorNode detsim.NodeID
	// onCrash, when set, sees every instance the crash nemesis is about to crash.
	onCrash func(*model.Router)
}

func newFleet(s *detsim.Sim) *fleet {
	return &fleet{s: s, dir: model.Directory{}, hist: &check.History{}}
}

// backends adds n backends named shard-<from>..., returning their layout entries.
func (f *fleet) backends(from, n int, ackEarly bool) []shardmap.Backend {
	var out []shardmap.Backend
	for i := from; i < from+n; i++ {
		name := "shard-" + strconv.Itoa(i)
		b := model.NewBackend(f.s, name, appRole)
		b.AckEarly = ackEarly
		f.dir[name] = b
		f.order = append(f.order, b)
		out = append(out, shardmap.Backend{Host: name, Port: 5432, Database: db})
	}
	return out
}

// routersAndClients adds the files target (holding rec's files), the store (holding rec),
// nr instances and nc clients.
func (f *fleet) start(rec *shardmap.Record, twoPC bool, nr, nc int) {
	f.store = model.NewStore(f.s)
	f.storeNode = f.s.Net.AddNode("store")
	f.operatorNode = f.s.Net.AddNode("operator")
	if _, err := f.store.CAS(dbRef, 0, rec); err != nil {
		panic(fmt.Sprintf("scenario: initial record refused: %v", err))
	}
	f.files = model.NewFiles(f.s, rec.Generation, model.Render(rec, twoPC))
	for i := range nr {
		f.routers = append(f.routers, model.NewRouter(f.s, "pgdog-"+strconv.Itoa(i), appRole, f.files, f.dir))
	}
	for i := range nc {
		f.clients = append(f.clients, f.s.Net.AddNode("client-"+strconv.Itoa(i)))
	}
}

// crashes registers the crash nemeses of instances and backends and the heal hook that
// boots whatever is down.
func (f *fleet) crashes() {
	s := f.s
	s.OnNemesis("pgdog.crash", func() {
		r := f.routers[s.Intn(len(f.routers))]
		if !r.Up() {
			return
		}
		if f.onCrash != nil {
			f.onCrash(r)
		}
		r.Crash()
		// Most restarts are quick; some instances stay down long enough to matter to the
		// in-doubt monitor's threshold (not when exploring: one quick restart).
		d := s.Between(100, 5_000)
		if !s.Exploring() && s.Intn(5) == 0 {
			d = s.Between(30_000, 600_000)
		}
		s.After(d, detsim.Label{Kind: "boot", To: r.ID}, r.Boot)
	})
	s.OnNemesis("backend.restart", func() {
		b := f.order[s.Intn(len(f.order))]
		if !s.Net.Up(b.Node) {
			return
		}
		b.Crash()
		s.After(s.Between(50, 3_000), detsim.Label{Kind: "boot", To: b.Name}, b.Boot)
	})
	s.OnHeal(func() {
		for _, b := range f.order {
			b.Boot()
		}
		for _, r := range f.routers {
			r.Boot()
		}
	})
}

// query sends a transaction from a client through an instance and records it.
func (f *fleet) query(client, via int, txn model.Txn) { f.queryThen(client, via, txn, nil) }

// queryThen is query with a callback once the client has its answer.
func (f *fleet) queryThen(client, via int, txn model.Txn, then func()) {
	s := f.s
	r := f.routers[via]
	op := f.hist.Invoke(&check.Op{ID: txn.ID, Client: s.Net.Name(f.clients[client]), Via: r.ID, Kind: "txn", Txn: txn, Invoke: s.Now()})
	flags := detsim.Idempotent // a read-only transaction may be delivered twice
	for _, o := range txn.Ops {
		if o.Kind != model.OpRead {
			flags = 0
		}
	}
	s.Net.Call(f.clients[client], r.Node, "query "+strconv.FormatInt(txn.ID, 10), flags,
		func(rep detsim.Reply) { r.Query(db, txn, rep) },
		func(v any, err error) {
			var reads [][]int64
			if v != nil {
				reads = v.([][]int64)
			}
			check.Complete(op, s.Now(), reads, err)
			s.Note(detsim.Label{Kind: "done", From: r.ID, To: op.Client, What: op.Outcome.String(), ID: txn.ID})
			if then != nil {
				then()
			}
		})
}

// transfer sends a bank transfer from a client through an instance and records it.
func (f *fleet) transfer(client, via int, id int64, from, to string, amount int64) {
	s := f.s
	r := f.routers[via]
	op := f.hist.Invoke(&check.Op{ID: id, Client: s.Net.Name(f.clients[client]), Via: r.ID, Kind: "transfer",
		Transfer: &check.Transfer{From: from, To: to, Amount: amount}, Invoke: s.Now()})
	s.Net.Call(f.clients[client], r.Node, "transfer "+strconv.FormatInt(id, 10), 0,
		func(rep detsim.Reply) { r.Transfer(db, id, from, to, amount, rep) },
		func(_ any, err error) {
			check.Complete(op, s.Now(), nil, err)
			s.Note(detsim.Label{Kind: "done", From: r.ID, To: op.Client, What: op.Outcome.String(), ID: id})
		})
}

// finalRow reads key from the backend layout routes it to.
func (f *fleet) finalRow(hosts []string) func(string) []int64 {
	return func(key string) []int64 { return f.dir[hosts[model.Route(key, len(hosts))]].Row(key) }
}

// runToEnd runs the fault window, then a quiet period, and returns a violation of the
// step budget if the run did not settle.
func (f *fleet) runToEnd(quiet int64, maxSteps int) *detsim.Violation {
	s := f.s
	s.StartNemesis()
	end := s.Options().Net.FaultWindow + quiet
	n := s.Run(end, maxSteps)
	if v := detsim.Pruned(s); v != nil {
		return v
	}
	if n == maxSteps {
		return &detsim.Violation{Invariant: "step-budget", T: s.Now(),
			Detail: fmt.Sprintf("the run used its %d steps before t=%d (a livelock, or a budget too small)", maxSteps, end)}
	}
	return nil
}

func hostsOf(l shardmap.Layout) []string {
	out := make([]string, len(l.Shards))
	for i, s := range l.Shards {
		out[i] = s.Backend.Host
	}
	return out
}

// pgHash builds a serving record at gen over backends.
func pgHash(gen uint64, bs []shardmap.Backend) *shardmap.Record {
	r := shardmap.NewPgHash(db, shardmap.Key{Column: "id", Type: shardmap.Bigint}, bs...)
	r.Generation = gen
	return r
}

// hashState registers the fleet's state with the explorer: every model, and the outcome of
// every client operation so far.
func (f *fleet) hashState() {
	f.s.SetStateHasher(func(h hash.Hash) {
		for _, b := range f.order {
			b.HashState(h)
		}
		for _, r := range f.routers {
			r.HashState(h)
		}
		for _, o := range f.hist.Ops {
			fmt.Fprintf(h, "o%d=%d|%v", o.ID, o.Outcome, o.Reads)
			if o.Outcome == check.Pending {
				// What a checker will judge of it when it answers: where it went, and
				// whether that shard was fenced already.
				if ds := f.router(o.Via).Dispatched[o.ID]; len(ds) > 0 {
					d := ds[len(ds)-1]
					fmt.Fprintf(h, "|%s:%v", d.Backend, f.dir[d.Backend].FencedAt(appRole, d.Step))
				}
			}
			h.Write([]byte{'\n'})
		}
	})
}

// saveBy is a HostConfig.Save for a machine restored from its snapshot by restore: what the
// host rebuilds after a crash is what a driver restores. A snapshot that does not restore
// is a bug of the machine, and the run panics on it, naming the machine.
func saveBy[In, Out, S any, M interface {
	machine.Machine[In, Out]
	Snapshot() S
}](name string, restore func(S) (M, error)) func(machine.Machine[In, Out]) func() machine.Machine[In, Out] {
	return func(m machine.Machine[In, Out]) func() machine.Machine[In, Out] {
		snap := m.(M).Snapshot()
		return func() machine.Machine[In, Out] {
			r, err := restore(snap)
			if err != nil {
				panic(fmt.Sprintf("scenario: %s snapshot does not restore: %v", name, err))
			}
			return r
		}
	}
}

// written is a store's answer to a compare-and-set as the machines' RecordWritten carries
// it: the new version, or the record a conflict found there.
func written(version any, err error) (uint64, *shardmap.Record) {
	var ce *adapters.ConflictError
	switch {
	case err == nil:
		return version.(uint64), nil
	case errors.As(err, &ce):
		return 0, ce.Current
	}
	return 0, nil
}
