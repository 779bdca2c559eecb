package vitesslaunch

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"loam.dev/router/internal/serverproc"
)

// Gate is a running vtgate: the MySQL protocol front end of every keyspace, with one user
// (static auth, a random password).
type Gate struct {
	// MySQLPort is vtgate's MySQL protocol port on 127.0.0.1.
	MySQLPort int
	// User and Password log in to it.
	User, Password string

	c    *Cluster
	name string
	proc *serverproc.Proc
}

// OpenVtgate starts a vtgate watching the cluster's cell and the given keyspaces (every
// keyspace when none is given: vtgate then refuses to start while a keyspace's shards do not
// cover the whole keyspace-ID range), waits until it answers a query as its user, and
// returns it. Close stops it.
func (c *Cluster) OpenVtgate(keyspaces ...string) (*Gate, error) {
	var pw [16]byte
	rand.Read(pw[:])
	c.mu.Lock()
	g := &Gate{User: "loam", Password: hex.EncodeToString(pw[:]), c: c, name: fmt.Sprintf("vtgate-%d", len(c.gates))}
	c.mu.Unlock()
	auth, err := json.Marshal(map[string][]map[string]string{g.User: {{"Password": g.Password, "UserData": g.User}}})
	if err != nil {
		return nil, err
	}
	err = retryPort(func() error {
		ports, err := freePorts(3)
		if err != nil {
			return err
		}
		args := append(c.topoFlags(), "--cell", Cell, "--cells-to-watch", Cell, "--tablet-types-to-wait", "PRIMARY",
			"--bind-address", "127.0.0.1", "--port", strconv.Itoa(ports[0]), "--grpc-bind-address", "127.0.0.1", "--grpc-port", strconv.Itoa(ports[1]),
			"--mysql-server-bind-address", "127.0.0.1", "--mysql-server-port", strconv.Itoa(ports[2]),
			"--mysql-auth-server-impl", "static", "--mysql-auth-server-static-string", string(auth),
			"--service-map", "grpc-vtgateservice", "--log-format", "text", "--config-file-not-found-handling=ignore")
		args = append(args, bufferFlags...)
		if len(keyspaces) > 0 {
			args = append(args, "--keyspaces-to-watch", strings.Join(keyspaces, ","))
		}
		cmd, err := c.command(context.Background(), g.name, c.bins.Vtgate, args...)
		if err != nil {
			return err
		}
		g.MySQLPort = ports[2]
		p, err := c.startServer(g.name, cmd, g.ping)
		if err != nil {
			if c.portTaken(g.name) {
				return errPortTaken
			}
			return err
		}
		g.proc = p
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.gates = append(c.gates, g)
	c.mu.Unlock()
	return g, nil
}

// bufferFlags turn on vtgate's buffering of primary traffic (the keyspace-events
// implementation, the only one in v0.24): while SwitchTraffic moves the writes, vtgate holds
// them, up to --buffer-window each, and sends them on to the new primaries, instead of
// refusing them. Measured by TestRealVitessDemo (2 writers, the report's "longest write
// pause" and "refused" lines): without it 8,480 inserts were refused during the switch (of
// 17,739 tried; pause 2.21 s), with it 2 (of 5,850; pause 2.15 s, the writes held rather
// than failed). The minimum time between two buffered events is short because a reshard
// switches, and may reverse and switch again, within seconds.
var bufferFlags = []string{"--enable-buffer", "--buffer-window", "20s", "--buffer-max-failover-duration", "40s",
	"--buffer-min-time-between-failovers", "1s", "--buffer-size", "10000", "--buffer-drain-concurrency", "4"}

// DSN is a go-sql-driver/mysql data source name for vtgate as its user on database (a
// keyspace, "" for none).
func (g *Gate) DSN(database string) string {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = g.User, g.Password, "tcp", hostPort(g.MySQLPort), database
	cfg.Timeout = 10 * time.Second
	return cfg.FormatDSN()
}

func (g *Gate) ping() error {
	db, err := sql.Open("mysql", g.DSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var one int
	return db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
}

func (g *Gate) stop() error {
	if g.proc != nil && g.proc.Stop(syscall.SIGTERM, 30*time.Second) {
		return fmt.Errorf("vitesslaunch: %s did not stop within 30s of SIGTERM; killed it", g.name)
	}
	return nil
}
