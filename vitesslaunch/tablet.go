package vitesslaunch

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"loam.dev/router/internal/serverproc"
)

// Tablet is one vttablet and the MariaDB it serves, run by mysqlctl.
type Tablet struct {
	// Alias is the tablet alias, "zone1-0000000100".
	Alias string
	UID   uint32
	// Keyspace and Shard are what the tablet serves.
	Keyspace, Shard string
	// MySQLPort is MariaDB's port on 127.0.0.1; Port and GRPCPort are vttablet's.
	MySQLPort, Port, GRPCPort int

	c         *Cluster
	vttablet  *serverproc.Proc
	mysqlPgid int // the process group mysqlctl init left mysqld in
}

// DBName is the MySQL database holding the keyspace's tables on this tablet.
func (tb *Tablet) DBName() string { return "vt_" + tb.Keyspace }

// Dir is the tablet's directory under VTDATAROOT (my.cnf, data, socket).
func (tb *Tablet) Dir() string {
	return filepath.Join(tb.c.dataRoot(), fmt.Sprintf("vt_%010d", tb.UID))
}

// DSN is a go-sql-driver/mysql data source name for the tablet's MariaDB as vt_dba (every
// privilege, no password, Unix socket only) on database ("" for none).
func (tb *Tablet) DSN(database string) string {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName = "vt_dba", "unix", filepath.Join(tb.Dir(), "mysql.sock"), database
	cfg.Timeout = 10 * time.Second
	return cfg.FormatDSN()
}

// Promote does to the tablet's MariaDB what a promotion outside Vitess does before Vitess is
// told (TabletExternallyReparented): it makes the server writable (SET GLOBAL read_only = 0;
// the tablets start read-only, and vttablet's ChangeType to PRIMARY does not clear it on
// MariaDB, checked on v0.24.4: it fails with errno 1290 creating the tablet's database).
func (tb *Tablet) Promote(ctx context.Context) error {
	db, err := sql.Open("mysql", tb.DSN(""))
	if err != nil {
		return fmt.Errorf("vitesslaunch: %w", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "SET GLOBAL read_only = 0"); err != nil {
		return fmt.Errorf("vitesslaunch: tablet %s: %w", tb.Alias, err)
	}
	return nil
}

// Ints runs query on the tablet's database as vt_dba and returns its first column, read as
// integers: what a row of a shard holds, bypassing Vitess.
func (tb *Tablet) Ints(ctx context.Context, query string) ([]int64, error) {
	db, err := sql.Open("mysql", tb.DSN(tb.DBName()))
	if err != nil {
		return nil, fmt.Errorf("vitesslaunch: %w", err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("vitesslaunch: tablet %s: %s: %w", tb.Alias, query, err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("vitesslaunch: tablet %s: %s: %w", tb.Alias, query, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("vitesslaunch: tablet %s: %s: %w", tb.Alias, query, err)
	}
	return out, nil
}

func (tb *Tablet) name(prog string) string { return fmt.Sprintf("%s-%d", prog, tb.UID) }

// StartShards starts one tablet per shard of keyspace (which NewKeyspace made), elects it
// primary with PlannedReparentShard, and rebuilds the keyspace's serving graph. The tablets
// are in the order of shards.
func (c *Cluster) StartShards(ctx context.Context, keyspace string, shards ...string) ([]*Tablet, error) {
	tablets := make([]*Tablet, len(shards))
	errs := make([]error, len(shards))
	var wg sync.WaitGroup
	for i, shard := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tablets[i], errs[i] = c.startTablet(keyspace, shard)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return tablets, c.elect(ctx, tablets)
}

// OpenTablet starts a tablet of keyspace/shard (keyspace made by NewKeyspace) and
// elects nothing: it serves as a REPLICA, and its shard has no primary unless one was
// elected before (make it primary as a failover would, with TabletExternallyReparented).
func (c *Cluster) OpenTablet(keyspace, shard string) (*Tablet, error) {
	return c.startTablet(keyspace, shard)
}

// elect makes every tablet its shard's primary with PlannedReparentShard and rebuilds the
// keyspace's serving graph.
func (c *Cluster) elect(ctx context.Context, tablets []*Tablet) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, tb := range tablets {
		if _, err := c.Vtctldclient(ctx, "PlannedReparentShard", tb.Keyspace+"/"+tb.Shard, "--new-primary", tb.Alias); err != nil {
			return err
		}
	}
	if len(tablets) > 0 {
		if _, err := c.Vtctldclient(ctx, "RebuildKeyspaceGraph", tablets[0].Keyspace); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) startTablet(keyspace, shard string) (*Tablet, error) {
	c.mu.Lock()
	uid := c.nextUID
	c.nextUID++
	c.mu.Unlock()
	tb := &Tablet{Alias: fmt.Sprintf("%s-%010d", Cell, uid), UID: uid, Keyspace: keyspace, Shard: shard, c: c}
	err := retryPort(func() error {
		port, err := serverproc.FreePort()
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		cmd, err := c.command(ctx, tb.name("mysqlctl"), c.bins.Mysqlctl, tb.mysqlctlArgs("--mysql-port", strconv.Itoa(port),
			"--mysqlctl-mycnf-template", c.mycnf, "--init-db-sql-file", c.initDB, "init")...)
		if err != nil {
			return err
		}
		err = cmd.Run()
		if cmd.Process != nil {
			tb.mysqlPgid = cmd.Process.Pid
		}
		if err != nil {
			tb.killMySQL()
			if c.portTaken(tb.name("mysqlctl")) || c.portTaken(tb.name("mysqld")) {
				return errPortTaken
			}
			return fmt.Errorf("vitesslaunch: mysqlctl init for tablet %s: %w\n--- %s ---\n%s", tb.Alias, err, c.logPath(tb.name("mysqlctl")),
				serverproc.LogTail(c.logPath(tb.name("mysqlctl"))))
		}
		tb.MySQLPort = port
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.tablets = append(c.tablets, tb) // from here Close stops it
	c.mu.Unlock()
	err = retryPort(func() error {
		ports, err := freePorts(2)
		if err != nil {
			return err
		}
		port, grpcPort := ports[0], ports[1]
		args := append(c.topoFlags(), "--tablet-path", tb.Alias, "--tablet-hostname", "127.0.0.1",
			"--init-keyspace", keyspace, "--init-shard", shard, "--init-tablet-type", "replica",
			"--health-check-interval", "1s", "--heartbeat-on-demand-duration=5s",
			"--bind-address", "127.0.0.1", "--port", strconv.Itoa(port), "--grpc-bind-address", "127.0.0.1", "--grpc-port", strconv.Itoa(grpcPort),
			"--service-map", "grpc-queryservice,grpc-tabletmanager,grpc-updatestream",
			"--log-format", "text", "--config-file-not-found-handling=ignore")
		cmd, err := c.command(context.Background(), tb.name("vttablet"), c.bins.Vttablet, args...)
		if err != nil {
			return err
		}
		p, err := c.startServer(tb.name("vttablet"), cmd, httpOK("http://"+hostPort(port)+"/debug/status"))
		if err != nil {
			if c.portTaken(tb.name("vttablet")) {
				return errPortTaken
			}
			return err
		}
		tb.vttablet, tb.Port, tb.GRPCPort = p, port, grpcPort
		return nil
	})
	if err != nil {
		return nil, err
	}
	return tb, nil
}

func (tb *Tablet) mysqlctlArgs(args ...string) []string {
	return append([]string{"--tablet-uid", strconv.FormatUint(uint64(tb.UID), 10), "--log-format", "text", "--config-file-not-found-handling=ignore"}, args...)
}

// killMySQL kills whatever mysqlctl init left running (mysqld_safe, mysqld).
func (tb *Tablet) killMySQL() {
	if tb.mysqlPgid > 0 {
		syscall.Kill(-tb.mysqlPgid, syscall.SIGKILL)
	}
}

// StopVttablet stops the tablet's vttablet (its MariaDB keeps running), for tests of a
// tablet that is down. Close stops the rest.
func (tb *Tablet) StopVttablet() {
	if tb.vttablet != nil {
		tb.vttablet.Stop(syscall.SIGTERM, 30*time.Second)
	}
}

// stop stops vttablet, then MariaDB with mysqlctl shutdown, then kills what is left.
func (tb *Tablet) stop() error {
	tb.StopVttablet()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := tb.c.runOut(ctx, false, tb.name("mysqlctl"), tb.c.bins.Mysqlctl, tb.mysqlctlArgs("shutdown")...)
	tb.killMySQL()
	return err
}
