package refrouter

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/configmap"
	"loam.dev/router/kernel/render"
)

// FleetOptions describe N instances of one database.
type FleetOptions struct {
	// Root is where the instances' directories are made: Root/<id>.
	Root string
	// N is the number of instances, named "<Prefix>1" ... "<Prefix>N".
	N      int
	Prefix string // default "ref-"
	// Database, User, MaxConns: as in Options, the same for every instance.
	Database, User string
	MaxConns       int32
	// Files, rendered for Generation, are written into every instance's directory before
	// it starts.
	Files      render.Files
	Generation uint64
}

// Fleet is N router instances of one database, each with its own directory, as N PgDog
// processes each with its own config files. The control plane reaches them one by one
// (Instance matches the lookup function the drivers take); clients go through Router(id).
// The fleet itself is the ConfigTarget of all their directories.
type Fleet struct {
	mu      sync.Mutex
	ids     []string
	routers map[string]*Router
}

var _ adapters.ConfigTarget = (*Fleet)(nil)

// OpenFleet writes opts.Files into each instance's directory and opens the instances.
func OpenFleet(opts FleetOptions) (*Fleet, error) {
	if opts.N <= 0 {
		return nil, fmt.Errorf("refrouter: a fleet needs at least one instance (N = %d)", opts.N)
	}
	if opts.Prefix == "" {
		opts.Prefix = "ref-"
	}
	f := &Fleet{routers: map[string]*Router{}}
	for i := 1; i <= opts.N; i++ {
		id := fmt.Sprintf("%s%d", opts.Prefix, i)
		dir, err := configmap.NewDir(filepath.Join(opts.Root, id))
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("refrouter: instance %s: %w", id, err)
		}
		if err := dir.WriteFiles(context.Background(), opts.Generation, opts.Files); err != nil {
			f.Close()
			return nil, fmt.Errorf("refrouter: instance %s: %w", id, err)
		}
		r, err := Open(Options{ID: id, Dir: dir.Path(), Target: dir, Database: opts.Database, User: opts.User, MaxConns: opts.MaxConns})
		if err != nil {
			f.Close()
			return nil, err
		}
		f.ids = append(f.ids, id)
		f.routers[id] = r
	}
	return f, nil
}

// IDs lists the instances in order.
func (f *Fleet) IDs() []string { return append([]string(nil), f.ids...) }

// Router returns the running instance id (nil if there is none).
func (f *Fleet) Router(id string) *Router {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.routers[id]
}

// Routers returns the running instances in order.
func (f *Fleet) Routers() []*Router {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*Router, 0, len(f.ids))
	for _, id := range f.ids {
		out = append(out, f.routers[id])
	}
	return out
}

// Instance returns instance id as the control plane sees it.
func (f *Fleet) Instance(id string) (adapters.RouterInstance, bool) {
	r := f.Router(id)
	return r, r != nil
}

// Instances returns every instance as the control plane sees it, in order.
func (f *Fleet) Instances() []adapters.RouterInstance {
	var out []adapters.RouterInstance
	for _, r := range f.Routers() {
		out = append(out, r)
	}
	return out
}

// WriteFiles implements adapters.ConfigTarget: it writes files as generation into every
// instance's directory, reachable or not, without reloading any (RELOAD is Apply's), all
// at once. The error joins those of the directories that refused: one that holds a newer
// generation matches adapters.ErrNewerGeneration. The directories that took the files keep
// them, which a retry of the same generation writes again as a no-op.
func (f *Fleet) WriteFiles(ctx context.Context, generation uint64, files render.Files) error {
	// Each instance has its own directory: written all at once, the cutover's pause waits
	// for the slowest one, not for their sum.
	rs := f.Routers()
	return each(len(rs), func(i int) error {
		if err := rs[i].Target().WriteFiles(ctx, generation, files); err != nil {
			return fmt.Errorf("refrouter: instance %s: %w", rs[i].ID(), err)
		}
		return nil
	})
}

// Restart stops instance id and starts it again from its directory: it loads the files
// there and forgets its pauses and its unreachability. Statements held by the old process
// fail with adapters.ErrClosed.
func (f *Fleet) Restart(ctx context.Context, id string) error {
	f.mu.Lock()
	old := f.routers[id]
	f.mu.Unlock()
	if old == nil {
		return fmt.Errorf("refrouter: no instance %q", id)
	}
	old.Close()
	r, err := Open(old.Options())
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.routers[id] = r
	f.mu.Unlock()
	return nil
}

// Close stops every instance.
func (f *Fleet) Close() {
	for _, r := range f.Routers() {
		if r != nil {
			r.Close()
		}
	}
}
