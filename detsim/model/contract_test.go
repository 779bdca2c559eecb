package model_test

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/conformance"
	"loam.dev/router/detsim"
	"loam.dev/router/detsim/model"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
)

// modelSession is an application session on a backend model: autocommit inserts, or a
// transaction whose statements check the session and whose commit applies them.
type modelSession struct {
	mu    *sync.Mutex
	b     *model.Backend
	role  string
	table string
	sess  uint64
	txn   []model.TableRow
	inTxn bool
}

func (m *modelSession) Insert(ctx context.Context, r conformance.BackendRow) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.inTxn {
		if err := m.b.Check(m.role, m.sess); err != nil {
			return err
		}
		m.txn = append(m.txn, model.TableRow{ID: r.ID, V: r.V})
		return nil
	}
	_, err := m.b.InsertRows(m.role, m.sess, m.table, []model.TableRow{{ID: r.ID, V: r.V}})
	return err
}

func (m *modelSession) Begin(context.Context) error {
	m.inTxn, m.txn = true, nil
	return nil
}

func (m *modelSession) Commit(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	rows := m.txn
	m.inTxn, m.txn = false, nil
	_, err := m.b.InsertRows(m.role, m.sess, m.table, rows)
	return err
}

func (m *modelSession) Close() {}

// TestBackendContract: the backend model is held to the ShardBackend contract suite the
// Postgres adapter runs (roles without members; no standby).
func TestBackendContract(t *testing.T) {
	conformance.RunBackendSuite(t, conformance.BackendHarness{
		Open: func(t conformance.TB) *conformance.BackendEnv {
			mu := &sync.Mutex{}
			b := model.NewBackend(nil, "shard-c", "app", "other")
			b.LoadTable("t", nil)
			return &conformance.BackendEnv{
				Backend: model.NewBackendSeam(b, mu), Role: "app", Other: "other", Table: "t",
				Login: func(_ context.Context, role string) (conformance.AppSession, error) {
					mu.Lock()
					defer mu.Unlock()
					// A login is a session with nothing run yet: open it with an empty commit.
					sess, err := b.InsertRows(role, 0, "t", nil)
					if err != nil {
						return nil, err
					}
					return &modelSession{mu: mu, b: b, role: role, table: "t", sess: sess}, nil
				},
				Load: func(_ context.Context, table string, rows []conformance.BackendRow) error {
					mu.Lock()
					defer mu.Unlock()
					rs := make([]model.TableRow, len(rows))
					for i, r := range rows {
						rs[i] = model.TableRow{ID: r.ID, V: r.V}
					}
					b.LoadTable(table, rs)
					return nil
				},
				Rows: func(_ context.Context, table string) ([]conformance.BackendRow, error) {
					mu.Lock()
					defer mu.Unlock()
					var out []conformance.BackendRow
					for _, r := range b.TableRows(table) {
						out = append(out, conformance.BackendRow{ID: r.ID, V: r.V})
					}
					return out, nil
				},
				Prepare: func(_ context.Context, gid string, r conformance.BackendRow) error {
					mu.Lock()
					defer mu.Unlock()
					_, err := b.PrepareRows("app", 0, gid, "t", []model.TableRow{{ID: r.ID, V: r.V}})
					return err
				},
				Now: func() time.Time { return time.UnixMilli(0).UTC() }, // the model's clock when it runs outside a simulation
			}
		},
	})
}

// routerRig is one router instance model over three backends in a quiet simulation.
type routerRig struct {
	s      *detsim.Sim
	files  *model.Files
	dir    model.Directory
	names  []string
	r      *model.Router
	client detsim.NodeID
	next   int64
}

func (g *routerRig) Instance() adapters.RouterInstance { return routerSeam{g} }
func (g *routerRig) Database() string                  { return "app" }
func (g *routerRig) Backends() int                     { return len(g.names) }

func (g *routerRig) Files(_ conformance.TB, gen uint64, backends []int) render.Files {
	var bs []shardmap.Backend
	for _, i := range backends {
		bs = append(bs, shardmap.Backend{Host: g.names[i], Port: 5432, Database: "app"})
	}
	rec := shardmap.NewPgHash("app", shardmap.Key{Column: "id", Type: shardmap.Bigint}, bs...)
	rec.Generation = gen
	return model.Render(rec, false)
}

func (g *routerRig) BadFiles(conformance.TB, uint64) render.Files {
	return render.Files{{Name: model.ConfigFile, Data: []byte("generation two\n")}}
}

func (g *routerRig) Write(_ conformance.TB, key int64) <-chan error {
	ch := make(chan error, 1)
	g.next++
	txn := model.Txn{ID: g.next, Ops: []model.Op{{Kind: model.OpAppend, Key: strconv.FormatInt(key, 10), Value: key}}}
	// A client waits on a paused database as long as it takes: a long-poll call.
	g.s.Net.Call(g.client, g.r.Node, "write", detsim.LongPoll, func(rep detsim.Reply) { g.r.Query("app", txn, rep) },
		func(_ any, err error) { ch <- err })
	return ch
}

func (g *routerRig) Holders(_ conformance.TB, key int64) []int {
	var out []int
	for i, n := range g.names {
		for _, v := range g.dir[n].Row(strconv.FormatInt(key, 10)) {
			if v == key {
				out = append(out, i)
			}
		}
	}
	return out
}

func (g *routerRig) Settle(conformance.TB) { g.s.Run(g.s.Now()+500, math.MaxInt) }

func (g *routerRig) Restart(conformance.TB) {
	g.r.Crash()
	g.r.Boot()
}

// routerSeam is the instance as the control plane sees it: Apply writes the files and
// reloads.
type routerSeam struct{ g *routerRig }

func (rs routerSeam) ID() string { return rs.g.r.ID }

func (rs routerSeam) Apply(_ context.Context, gen uint64, files render.Files) (adapters.Applied, error) {
	if err := rs.g.files.Write(gen, files); err != nil {
		return adapters.Applied{}, &adapters.RouterError{Instance: rs.g.r.ID, Op: "Apply", Err: err}
	}
	return rs.g.r.Reload()
}

func (rs routerSeam) Pause(_ context.Context, db string) error  { return rs.g.r.Pause(db) }
func (rs routerSeam) Resume(_ context.Context, db string) error { return rs.g.r.Resume(db) }
func (rs routerSeam) Observe(context.Context) (adapters.Observed, error) {
	return rs.g.r.Observe(), nil
}

// TestRouterContract: the router instance model is held to the RouterInstance contract
// suite the reference router runs, with its own routing function (Postgres hash
// partitioning of the key as text).
func TestRouterContract(t *testing.T) {
	conformance.RunRouterSuite(t, conformance.RouterHarness{
		Open: func(t conformance.TB) conformance.RouterRig {
			s := detsim.New(detsim.Config{Seed: 1})
			g := &routerRig{s: s, dir: model.Directory{}}
			for i := range 3 {
				n := fmt.Sprintf("shard-%d", i)
				g.names = append(g.names, n)
				g.dir[n] = model.NewBackend(s, n, "app")
			}
			g.files = model.NewFiles(s, 1, nil)
			_ = g.files.Write(1, g.Files(t, 1, []int{0, 1}))
			g.r = model.NewRouter(s, "pgdog-c", "app", g.files, g.dir)
			g.client = s.Net.AddNode("client")
			return g
		},
		Route: func(key int64, n int) int { return model.Route(strconv.FormatInt(key, 10), n) },
	})
}
