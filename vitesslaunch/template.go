package vitesslaunch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// moduleDir finds Vitess's module in the module cache (downloading it if needed: it is the
// module vitessbin builds from, so it is there once the programs are built).
var moduleDir = sync.OnceValues(func() (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", "vitess.io/vitess@"+Version)
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("vitesslaunch: go mod download vitess.io/vitess@%s (for its config files): %w\n%s", Version, err, out)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return "", fmt.Errorf("vitesslaunch: go mod download vitess.io/vitess@%s: no module directory in %q (%v)", Version, out, err)
	}
	return m.Dir, nil
})

// testMycnf comes after Vitess's own settings (a later line wins): loopback only, and fast
// rather than crash-safe, which no test needs.
const testMycnf = `
# vitesslaunch: loopback only; fast rather than crash-safe.
bind-address = 127.0.0.1
sync_binlog = 0
innodb_flush_log_at_trx_commit = 0
innodb_doublewrite = 0
innodb_buffer_pool_size = 32M
performance_schema = 0
max_connections = 200
`

// mycnfTemplate is what mysqlctl builds for MariaDB 10 by itself ("[mysqld]", default.cnf,
// mariadb10.cnf), without mariadb10.cnf's plugin-load line: it loads semisync_master.so and
// semisync_slave.so, which Debian's MariaDB does not ship (semi-sync is built into MariaDB
// since 10.3, so its variables, which the file also sets, still exist).
func mycnfTemplate(vitessDir string) (string, error) {
	def, err := os.ReadFile(filepath.Join(vitessDir, "config", "mycnf", "default.cnf"))
	if err != nil {
		return "", fmt.Errorf("vitesslaunch: %w", err)
	}
	maria, err := os.ReadFile(filepath.Join(vitessDir, "config", "mycnf", "mariadb10.cnf"))
	if err != nil {
		return "", fmt.Errorf("vitesslaunch: %w", err)
	}
	kept, dropped := dropLines(string(maria), func(l string) bool { return strings.HasPrefix(strings.TrimSpace(l), "plugin-load") })
	if dropped != 1 {
		return "", fmt.Errorf("vitesslaunch: expected one plugin-load line in Vitess %s's mariadb10.cnf, found %d; re-derive the template for this version", Version, dropped)
	}
	return "[mysqld]\n" + string(def) + kept + testMycnf, nil
}

// initDBSQL is Vitess's init_db.sql without the lines that read or set super_read_only,
// which MariaDB does not have (the script saves, clears and restores it around its grants).
func initDBSQL(vitessDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(vitessDir, "config", "init_db.sql"))
	if err != nil {
		return "", fmt.Errorf("vitesslaunch: %w", err)
	}
	kept, dropped := dropLines(string(b), func(l string) bool {
		l = strings.TrimSpace(l)
		return !strings.HasPrefix(l, "#") && strings.Contains(l, "super_read_only")
	})
	if dropped == 0 {
		return "", fmt.Errorf("vitesslaunch: no super_read_only statement in Vitess %s's init_db.sql; re-derive it for this version", Version)
	}
	return kept, nil
}

// dropLines removes the lines drop matches and counts them.
func dropLines(text string, drop func(string) bool) (string, int) {
	var out bytes.Buffer
	n := 0
	for _, l := range strings.SplitAfter(text, "\n") {
		if drop(l) {
			n++
			continue
		}
		out.WriteString(l)
	}
	return out.String(), n
}
