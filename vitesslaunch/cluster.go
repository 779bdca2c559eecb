package vitesslaunch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"loam.dev/router/internal/serverproc"
)

// Cell is the one cell every cluster has.
const Cell = "zone1"

// Cluster is a running Vitess: etcd, vtctld, and the tablets and vtgate added to it.
type Cluster struct {
	// TopoAddr is etcd's client address, host:port.
	TopoAddr string
	// VtctldAddr is vtctld's gRPC address, host:port.
	VtctldAddr string

	bins   Binaries
	root   string              // private directory holding everything the cluster writes
	cred   *syscall.Credential // the user the programs run as (nil: this one)
	mycnf  string              // the derived --mysqlctl-mycnf-template
	initDB string              // the derived --init-db-sql-file

	etcd, vtctld *serverproc.Proc

	mu      sync.Mutex
	nextUID uint32
	tablets []*Tablet
	gates   []*Gate
	extra   []*serverproc.Proc // vtctlds StartVtctld started
}

// Open starts a cluster: etcd and vtctld, the cell registered. An error matching
// ErrNoBinaries means the machine cannot run Vitess (it names LOAM_VITESS_BIN). Close stops
// and removes it.
func Open() (*Cluster, error) {
	bins, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	vitessDir, err := moduleDir()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, ErrNoBinaries)
	}
	cred, err := unprivileged()
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "loam-vitess-")
	if err != nil {
		return nil, fmt.Errorf("vitesslaunch: making a directory under %s: %w", os.TempDir(), err)
	}
	c := &Cluster{bins: bins, root: root, cred: cred, nextUID: 100}
	if err := c.prepare(vitessDir); err != nil {
		c.Close()
		return nil, err
	}
	startVtctld := func() (err error) { c.vtctld, c.VtctldAddr, err = c.startVtctld("vtctld"); return err }
	for _, step := range []func() error{c.startEtcd, c.addCell, startVtctld} {
		if err := step(); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// prepare makes the directories and the derived MariaDB files, owned by the programs' user.
func (c *Cluster) prepare(vitessDir string) error {
	for _, d := range []string{"logs", "tmp", "etcd", "vtdataroot"} {
		if err := os.MkdirAll(filepath.Join(c.root, d), 0o755); err != nil {
			return fmt.Errorf("vitesslaunch: %w", err)
		}
	}
	cnf, err := mycnfTemplate(vitessDir)
	if err != nil {
		return err
	}
	sql, err := initDBSQL(vitessDir)
	if err != nil {
		return err
	}
	c.mycnf, c.initDB = filepath.Join(c.root, "mycnf.tmpl"), filepath.Join(c.root, "init_db.sql")
	if err := os.WriteFile(c.mycnf, []byte(cnf), 0o644); err != nil {
		return fmt.Errorf("vitesslaunch: %w", err)
	}
	if err := os.WriteFile(c.initDB, []byte(sql), 0o644); err != nil {
		return fmt.Errorf("vitesslaunch: %w", err)
	}
	if err := os.Chmod(c.root, 0o755); err != nil {
		return fmt.Errorf("vitesslaunch: %w", err)
	}
	return handOver(c.root, c.cred)
}

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// topoFlags reach the global topology in etcd.
func (c *Cluster) topoFlags() []string {
	return []string{"--topo-implementation", "etcd2", "--topo-global-server-address", c.TopoAddr, "--topo-global-root", "/vitess/global"}
}

// retryPort runs start up to five times while it fails because another process took the
// port it was given.
func retryPort(start func() error) error {
	var err error
	for range 5 {
		if err = start(); !errors.Is(err, errPortTaken) {
			return err
		}
	}
	return err
}

func (c *Cluster) startEtcd() error {
	return retryPort(func() error {
		ports, err := freePorts(2)
		if err != nil {
			return err
		}
		client := ports[0]
		cu, pu := "http://"+hostPort(client), "http://"+hostPort(ports[1])
		os.RemoveAll(filepath.Join(c.root, "etcd", "data"))
		cmd, err := c.command(context.Background(), "etcd", c.bins.Etcd, "--name", "vitesslaunch", "--data-dir", filepath.Join(c.root, "etcd", "data"),
			"--listen-client-urls", cu, "--advertise-client-urls", cu, "--listen-peer-urls", pu, "--initial-advertise-peer-urls", pu,
			"--initial-cluster", "vitesslaunch="+pu, "--unsafe-no-fsync")
		if err != nil {
			return err
		}
		p, err := c.startServer("etcd", cmd, httpOK(cu+"/health"))
		if err != nil {
			if c.portTaken("etcd") {
				return errPortTaken
			}
			return err
		}
		c.etcd, c.TopoAddr = p, hostPort(client)
		return nil
	})
}

// addCell registers the cell in the global topology, with vtctldclient's in-process vtctld
// (--server internal): no vtctld runs yet.
func (c *Cluster) addCell() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := append([]string{"--server", "internal"}, c.topoFlags()...)
	args = append(args, "AddCellInfo", "--root", "/vitess/"+Cell, "--server-address", c.TopoAddr, Cell)
	_, err := c.run(ctx, "vtctldclient", c.bins.Vtctldclient, args...)
	return err
}

// startVtctld starts a vtctld with the extra flags and returns it and its gRPC address.
func (c *Cluster) startVtctld(name string, extra ...string) (proc *serverproc.Proc, addr string, err error) {
	err = retryPort(func() error {
		ports, err := freePorts(2)
		if err != nil {
			return err
		}
		port, grpcPort := ports[0], ports[1]
		args := append(c.topoFlags(), "--service-map", "grpc-vtctl,grpc-vtctld",
			"--bind-address", "127.0.0.1", "--port", strconv.Itoa(port), "--grpc-bind-address", "127.0.0.1", "--grpc-port", strconv.Itoa(grpcPort),
			"--log-format", "text", "--config-file-not-found-handling=ignore")
		cmd, err := c.command(context.Background(), name, c.bins.Vtctld, append(args, extra...)...)
		if err != nil {
			return err
		}
		p, err := c.startServer(name, cmd, dialable(hostPort(grpcPort)))
		if err != nil {
			if c.portTaken(name) {
				return errPortTaken
			}
			return err
		}
		proc, addr = p, hostPort(grpcPort)
		return nil
	})
	return proc, addr, err
}

// OpenVtctld starts another vtctld on the cluster's topology, with extra flags (e.g.
// --grpc-cert and --grpc-key, files written with PlaceFile), and returns its gRPC address.
// Close stops it.
func (c *Cluster) OpenVtctld(extra ...string) (string, error) {
	c.mu.Lock()
	name := fmt.Sprintf("vtctld-%d", len(c.extra)+1)
	c.mu.Unlock()
	p, addr, err := c.startVtctld(name, extra...)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	c.extra = append(c.extra, p)
	c.mu.Unlock()
	return addr, nil
}

// PlaceFile writes a file the cluster's programs can read (mode 0600, owned by their
// user) and returns its path.
func (c *Cluster) PlaceFile(name string, data []byte) (string, error) {
	dir, err := os.MkdirTemp(filepath.Join(c.root, "tmp"), "file-")
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name), data, 0o600)
	}
	if err == nil {
		err = handOver(dir, c.cred)
	}
	if err != nil {
		return "", fmt.Errorf("vitesslaunch: %w", err)
	}
	return filepath.Join(dir, name), nil
}

// Vtctldclient runs vtctldclient against the cluster's vtctld and returns its output.
func (c *Cluster) Vtctldclient(ctx context.Context, args ...string) ([]byte, error) {
	return c.run(ctx, "vtctldclient", c.bins.Vtctldclient, append([]string{"--server", c.VtctldAddr}, args...)...)
}

// NewKeyspace creates keyspace with durability policy "none" (the only one tablets on
// MariaDB without replicas can meet).
func (c *Cluster) NewKeyspace(ctx context.Context, keyspace string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	_, err := c.Vtctldclient(ctx, "CreateKeyspace", "--durability-policy=none", keyspace)
	return err
}

// SignalVtctld sends sig to vtctld (SIGSTOP freezes it, SIGCONT thaws it), for tests of a vtctld
// that does not answer.
func (c *Cluster) SignalVtctld(sig syscall.Signal) error {
	return syscall.Kill(c.vtctld.Pid(), sig)
}

// Close stops every program of the cluster and removes its files.
func (c *Cluster) Close() error {
	var errs []error
	c.mu.Lock()
	gates, tablets, extra := c.gates, c.tablets, c.extra
	c.gates, c.tablets, c.extra = nil, nil, nil
	c.mu.Unlock()
	for _, p := range extra {
		p.Stop(syscall.SIGTERM, 30*time.Second)
	}
	for _, g := range gates {
		errs = append(errs, g.stop())
	}
	var wg sync.WaitGroup
	tabErrs := make([]error, len(tablets))
	for i, tb := range tablets {
		wg.Add(1)
		go func() { defer wg.Done(); tabErrs[i] = tb.stop() }()
	}
	wg.Wait()
	errs = append(errs, tabErrs...)
	if c.vtctld != nil {
		syscall.Kill(c.vtctld.Pid(), syscall.SIGCONT)
		c.vtctld.Stop(syscall.SIGTERM, 30*time.Second)
	}
	if c.etcd != nil {
		c.etcd.Stop(syscall.SIGTERM, 30*time.Second)
	}
	if err := os.RemoveAll(c.root); err != nil {
		errs = append(errs, fmt.Errorf("vitesslaunch: removing %s: %w", c.root, err))
	}
	return errors.Join(errs...)
}
