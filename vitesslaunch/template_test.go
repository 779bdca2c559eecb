package vitesslaunch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDerivedFilesRefuseAnotherLayout: a Vitess whose files no longer hold the lines the
// derivation removes is an error that says to re-derive, not a silent copy.
func TestDerivedFilesRefuseAnotherLayout(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "config", "mycnf"), 0o755))
	write := func(name, text string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "config", name), []byte(text), 0o644))
	}
	write("mycnf/default.cnf", "port = {{.MysqlPort}}\n")
	write("mycnf/mariadb10.cnf", "binlog_format = ROW\n")
	write("init_db.sql", "CREATE USER 'vt_dba'@'localhost';\n")
	_, err := mycnfTemplate(dir)
	require.ErrorContains(t, err, "expected one plugin-load line")
	_, err = initDBSQL(dir)
	require.ErrorContains(t, err, "re-derive it")

	write("mycnf/mariadb10.cnf", "binlog_format = ROW\nplugin-load = a=semisync_master.so\nrpl_semi_sync_master_timeout = 1\n")
	write("init_db.sql", "# keeps super_read_only in a comment\nSET GLOBAL super_read_only='OFF';\nCREATE USER 'vt_dba'@'localhost';\n")
	cnf, err := mycnfTemplate(dir)
	require.NoError(t, err)
	require.Equal(t, "[mysqld]\nport = {{.MysqlPort}}\nbinlog_format = ROW\nrpl_semi_sync_master_timeout = 1\n"+testMycnf, cnf)
	sql, err := initDBSQL(dir)
	require.NoError(t, err)
	require.Equal(t, "# keeps super_read_only in a comment\nCREATE USER 'vt_dba'@'localhost';\n", sql)
}

// TestRealDerivedFiles: the files derived from Vitess v0.24.4's own keep everything but the
// lines MariaDB cannot take.
func TestRealDerivedFiles(t *testing.T) {
	dir, err := moduleDir()
	if err != nil { // no go command or no way to the module: the machine cannot run Vitess
		if os.Getenv("LOAM_REQUIRE_REAL") == "1" {
			t.Fatalf("%v; failing instead of skipping because LOAM_REQUIRE_REAL=1", err)
		}
		t.Skipf("skipped: needs vitess (its module for the config files) (%v)", err)
	}
	cnf, err := mycnfTemplate(dir)
	require.NoError(t, err)
	require.NotContains(t, cnf, "semisync_master.so")
	require.Contains(t, cnf, "binlog_format = ROW")
	require.Contains(t, cnf, "datadir = {{.DataDir}}")
	require.Contains(t, cnf, "bind-address = 127.0.0.1")
	sql, err := initDBSQL(dir)
	require.NoError(t, err)
	require.Contains(t, sql, "CREATE USER 'vt_dba'@'localhost';")
	for _, l := range strings.Split(sql, "\n") {
		if !strings.HasPrefix(l, "#") {
			require.NotContains(t, l, "super_read_only")
		}
	}
}
