package controller

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
)

// TestConfigErrorsNameKeyAndFix: every kind of mistake is reported with the file, the line
// where the decoder knows it, the key's full name, and what would be accepted.
func TestConfigErrorsNameKeyAndFix(t *testing.T) {
	t.Setenv("SET_PW", "x")
	t.Setenv("LONG_TOKEN", "0123456789abcdef0123")
	for _, c := range []struct{ name, text, want string }{
		{"unknown key with a suggestion", "[controller]\nlease_tll = \"5s\"\n", `loam.toml:2: controller.lease_tll: unknown key (did you mean "lease_ttl"?)`},
		{"unknown table", "[controler]\nid = \"x\"\n", `loam.toml:1: controler: unknown key (did you mean "controller"?)`},
		{"two unknown keys", "[controller]\nidd = 1\n[[databases]]\nnme = \"a\"\n", "loam.toml: 2 unknown keys:\n  line 2: controller.idd: unknown key (did you mean \"id\"?)\n  line 4: databases.nme: unknown key (did you mean \"name\"?)"},
		{"bad duration", "[controller]\nlease_ttl = \"5 seconds\"\n", `loam.toml:2: controller.lease_ttl: "5 seconds" is not a duration (write it as a string such as "30s"`},
		{"wrong type", "[[databases]]\nname = \"app\"\ninsecure = \"yes\"\n", "databases.insecure: wrong type: string given, bool expected"},
		{"syntax", "[controller\n", "loam.toml:1"},
		{"short ttl", "[controller]\nlease_ttl = \"10ms\"\n", `controller.lease_ttl: 10ms is too short`},
		{"store kind", "[store]\nkind = \"zookeeper\"\n", `store.kind: "zookeeper" is not a store kind; use "bolt" (embedded, the default), "etcd"`},
		{"tikv without pd", "[store]\nkind = \"tikv\"\n", "store.pd: kind tikv needs PD endpoints"},
		{"remote url", "[store]\nkind = \"remote\"\nurl = \"127.0.0.1:7070\"\n", `store.url: kind remote needs the store server's URL, e.g. url = "http://127.0.0.1:7070"`},
		{"bolt with pd", "[store]\npd = [\"a:1\"]\n", "kind bolt takes only dir"},
		{"alerts file without path", "[alerts]\nkind = \"file\"\n", "alerts.path: kind file needs a path"},
		{"database twice", "[[databases]]\nname = \"app\"\n[[databases]]\nname = \"app\"\n", "databases[1].name: default/app is configured twice"},
		{"bad db name", "[[databases]]\nname = \"a/b\"\n", "databases[0].name: adapters: db ref"},
		{"router without id", "[[databases]]\nname = \"app\"\n[[databases.routers]]\nkind = \"pgdog\"\n", "databases[0].routers[0].id: every router needs an id"},
		{"router without admin", "[[databases]]\nname = \"app\"\n[[databases.routers]]\nid = \"r\"\n", `databases[0].routers[0].admin: give the instance's admin database, e.g. admin = "10.0.0.5:6432"`},
		{"router kind", "[[databases]]\nname = \"app\"\n[[databases.routers]]\nid = \"r\"\nkind = \"haproxy\"\n", `databases[0].routers[0].kind: "haproxy" is not a router kind`},
		{"designated unknown", "[[databases]]\nname = \"app\"\n[[databases.routers]]\nid = \"r1\"\nadmin = \"h:1\"\n[databases.cutover]\ndesignated = \"r9\"\n", `databases[0].cutover.designated: "r9" is not one of this database's routers (r1)`},
		{"instance_attempts negative", "[[databases]]\nname = \"app\"\n[databases.cutover]\ninstance_attempts = -1\n", "databases[0].cutover.instance_attempts: -1 is negative; give how many times the pause and the reload are sent to an instance, e.g. instance_attempts = 1"},
		{"attempts negative", "[[databases]]\nname = \"app\"\n[databases.cutover]\nattempts = -2\n", "databases[0].cutover.attempts: -2 is negative"},
		{"unset env", "[[databases]]\nname = \"app\"\napp_password_env = \"LOAM_SURELY_UNSET_VAR\"\n", "databases[0].app_password_env: the environment variable LOAM_SURELY_UNSET_VAR is empty or unset"},
		{"sslmode", "[[databases]]\nname = \"app\"\nshard_sslmode = \"on\"\n", `databases[0].shard_sslmode: "on" is not an sslmode`},
		{"target kind", "[[databases]]\nname = \"app\"\n[databases.target]\nkind = \"s3\"\n", `databases[0].target.kind: "s3" is not a target kind; use "files" (files_dir, the default) or "kubernetes"`},
		{"target key unknown", "[[databases]]\nname = \"app\"\n[databases.target]\nconfig_map = \"pgdog\"\n", `databases.target.config_map: unknown key (did you mean "configmap"?)`},
		{"kubernetes without configmap", "[[databases]]\nname = \"app\"\n[databases.target]\nkind = \"kubernetes\"\nsecret = \"u\"\n", "databases[0].target.configmap: kind kubernetes needs the ConfigMap the PgDog pods mount"},
		{"kubernetes without secret", "[[databases]]\nname = \"app\"\n[databases.target]\nkind = \"kubernetes\"\nconfigmap = \"pgdog\"\n", "databases[0].target.secret: kind kubernetes needs the Secret the PgDog pods mount (users.toml: credentials never go into a ConfigMap)"},
		{"kubernetes bad name", "[[databases]]\nname = \"app\"\n[databases.target]\nkind = \"kubernetes\"\nconfigmap = \"PgDog\"\nsecret = \"u\"\n", `databases[0].target.configmap: "PgDog" is not a Kubernetes object name`},
		{"kubernetes bad namespace", "[[databases]]\nname = \"app\"\n[databases.target]\nkind = \"kubernetes\"\nnamespace = \"a.b\"\nconfigmap = \"pgdog\"\nsecret = \"u\"\n", `databases[0].target.namespace: "a.b" is not a Kubernetes object name`},
		{"kubernetes and files_dir", "[[databases]]\nname = \"app\"\nfiles_dir = \"/x\"\n[databases.target]\nkind = \"kubernetes\"\nconfigmap = \"pgdog\"\nsecret = \"u\"\n", "databases[0].target.kind: kind kubernetes writes the ConfigMap \"pgdog\", and files_dir /x is set too: remove files_dir"},
		{"kubernetes key on files", "[[databases]]\nname = \"app\"\n[databases.target]\nconfigmap = \"pgdog\"\n", `databases[0].target.configmap: is for kind = "kubernetes"; kind "files" writes files_dir`},
		{"container without pods", "[[databases]]\nname = \"app\"\n[databases.target]\nkind = \"kubernetes\"\nconfigmap = \"pgdog\"\nsecret = \"u\"\ncontainer = \"pgdog\"\n", "databases[0].target.container: names PgDog's container in the roster's pods: set pods"},
		{"kubernetes some config_dirs", "[[databases]]\nname = \"app\"\n[databases.target]\nkind = \"kubernetes\"\nconfigmap = \"pgdog\"\nsecret = \"u\"\n[[databases.routers]]\nid = \"a\"\nadmin = \"h:1\"\nconfig_dir = \"/a\"\n[[databases.routers]]\nid = \"b\"\nadmin = \"h:2\"\n", "databases[0].target.kind: with kind kubernetes, config_dir is where the controller reads what a pod sees before its RELOAD: give it for every router of the database or for none (1 of 2 have one)"},
		{"fencing addrs", "[[fencing]]\nname = \"s\"\n", "fencing[0].addrs: give the Valkey/Redis addresses"},
		{"lsn unknown key", "[lsn]\nintervall = \"10ms\"\n", `loam.toml:2: lsn.intervall: unknown key (did you mean "interval"?)`},
		{"lsn endpoint unknown key", "[[lsn.endpoints]]\nhost = \"a\"\nprot = 5432\n", `lsn.endpoints.prot: unknown key (did you mean "port"?)`},
		{"lsn interval below the clock", "[lsn]\ninterval = \"500us\"\n", `lsn.interval: 500µs is below the monitor's 1ms clock; use at least "1ms" (default "10ms")`},
		{"lsn history too short", "[lsn]\ninterval = \"1s\"\nhistory = \"1s\"\n", "lsn.history: 1s keeps less than two polls of lsn.interval 1s"},
		{"lsn endpoint without host", "[[lsn.endpoints]]\nport = 5432\n", `lsn.endpoints[0].host: give the server's host, e.g. host = "10.0.0.2"`},
		{"lsn endpoint port", "[[lsn.endpoints]]\nhost = \"a\"\nport = 70000\n", "lsn.endpoints[0].port: 70000 is not a TCP port"},
		{"lsn endpoint twice", "[[lsn.endpoints]]\nhost = \"a\"\n[[lsn.endpoints]]\nhost = \"b\"\n[[lsn.endpoints]]\nhost = \"a\"\nport = 5432\n", "lsn.endpoints[2]: a:5432 is listed twice (also lsn.endpoints[0]): a server is polled once however many hostgroups list it"},
		{"lsn sslmode", "[lsn]\nsslmode = \"yes\"\n", `lsn.sslmode: "yes" is not an sslmode`},
		{"lsn password without a verified server", "[lsn]\npassword_env = \"SET_PW\"\nsslmode = \"require\"\n", `lsn.sslmode: "require" does not verify the server, so the monitor's password could be sent to whoever answers; use verify-full (the default) or verify-ca, or set lsn.insecure = true`},
		{"lsn password env", "[lsn]\npassword_env = \"LOAM_SURELY_UNSET_VAR\"\n", "lsn.password_env: the environment variable LOAM_SURELY_UNSET_VAR is empty or unset"},
		{"credential token unset", "[[credentials]]\nname = \"ops\"\nrole = \"operator\"\ntoken_env = \"LOAM_SURELY_UNSET_VAR\"\n", "credentials[0].token_env: the environment variable LOAM_SURELY_UNSET_VAR is empty or unset"},
		{"credential token short", "[[credentials]]\nname = \"ops\"\nrole = \"operator\"\ntoken_env = \"SET_PW\"\n", "credentials[0].token_env: the token is 1 characters; use at least 16"},
		{"credential token file missing", "[[credentials]]\nname = \"ops\"\nrole = \"operator\"\ntoken_file = \"/surely/not/there\"\n", "credentials[0].token_file: stat /surely/not/there"},
		{"credential role", "[[credentials]]\nname = \"ops\"\nrole = \"admin\"\ntoken_env = \"LONG_TOKEN\"\n", `credentials[0].role: "admin" is not a role`},
		{"credential without secret", "[[credentials]]\nname = \"ops\"\nrole = \"operator\"\n", "credentials[0]: give the credential a token_env, a token_file or a cert_cn"},
		{"credential twice", "[[credentials]]\nname = \"ops\"\nrole = \"operator\"\ntoken_env = \"LONG_TOKEN\"\n[[credentials]]\nname = \"ops\"\nrole = \"operator\"\ntoken_env = \"LONG_TOKEN\"\n", `credentials[1].name: every credential needs a unique name`},
		{"credential same token", "[[credentials]]\nname = \"a\"\nrole = \"operator\"\ntoken_env = \"LONG_TOKEN\"\n[[credentials]]\nname = \"b\"\nrole = \"controller\"\ntoken_env = \"LONG_TOKEN\"\n", `credentials[1].token_env: the same token as credential "a"`},
		{"cert credential without CA", "[[credentials]]\nname = \"a\"\nrole = \"operator\"\ncert_cn = \"ops\"\n", "credentials[0].cert_cn: a certificate credential needs tls.client_ca_file"},
		{"client token unset", "[controller]\ntoken_env = \"LOAM_SURELY_UNSET_VAR\"\n", "controller.token_env: the environment variable LOAM_SURELY_UNSET_VAR is empty or unset"},
		{"store token unset", "[store]\nkind = \"remote\"\nurl = \"http://127.0.0.1:1\"\ntoken_env = \"LOAM_SURELY_UNSET_VAR\"\n", "store.token_env: the environment variable LOAM_SURELY_UNSET_VAR is empty or unset"},
		{"tls half", "[tls]\ncert_file = \"a.crt\"\n", "tls: give both cert_file and key_file"},
		{"lease max below ttl", "[controller]\nlease_ttl = \"30s\"\nlease_max_ttl = \"10s\"\n", "controller.lease_max_ttl: 10s is below controller.lease_ttl 30s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig("loam.toml", []byte(c.text))
			require.Error(t, err)
			require.True(t, errors.Is(err, ErrConfig))
			require.Contains(t, err.Error(), c.want)
			require.True(t, strings.HasPrefix(err.Error(), "loam.toml"), "the error names the file: %v", err)
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Setenv("SET_PW", "x")
	c, err := ParseConfig("loam.toml", []byte("[[databases]]\nname = \"app\"\napp_password_env = \"SET_PW\"\n[databases.indoubt]\nperiod = \"45s\"\nstuck_after = \"20m\"\n"))
	require.NoError(t, err)
	require.Equal(t, "bolt", c.Store.Kind)
	require.Equal(t, defaultDataDir, c.Store.Dir)
	require.Equal(t, defaultListen, c.Controller.Listen)
	require.NotEmpty(t, c.Controller.ID)
	require.Equal(t, "default", c.Databases[0].Namespace)
	require.Equal(t, 45*time.Second, c.Databases[0].InDoubt.Period.Duration)
	require.Equal(t, 20*time.Minute, c.Databases[0].InDoubt.StuckAfter.Duration)
	require.Equal(t, 30*time.Second, c.Controller.DrainTimeout.Or(DefaultDrainTimeout))
	d, ok := c.Database(adapters.DBRef{Namespace: "default", Database: "app"})
	require.True(t, ok)
	require.Equal(t, "x", secret(d.AppPasswordEnv))
}

// TestConfigLSNDefaults: an endpoint alone runs the monitor with the proxy's defaults.
func TestConfigLSNDefaults(t *testing.T) {
	c, err := ParseConfig("loam.toml", []byte("[[lsn.endpoints]]\nhost = \"10.0.0.2\"\n"))
	require.NoError(t, err)
	l := c.LSN
	require.True(t, l.On())
	require.Equal(t, 5432, l.Endpoints[0].Port)
	require.Equal(t, 10*time.Millisecond, l.Interval.Duration)
	require.Equal(t, 100*time.Millisecond, l.Timeout.Duration)
	require.Equal(t, 60*time.Second, l.History.Duration)
	require.Equal(t, "postgres", l.User)
	require.Equal(t, "verify-full", l.SSLMode)
	c, err = ParseConfig("loam.toml", []byte("[lsn]\nenabled = false\n[[lsn.endpoints]]\nhost = \"10.0.0.2\"\n"))
	require.NoError(t, err)
	require.False(t, c.LSN.On())
	c, err = ParseConfig("loam.toml", nil)
	require.NoError(t, err)
	require.False(t, c.LSN.On(), "no endpoints, no monitor")
}

// FuzzParseConfig: any text is either a config or an error, never a panic.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("[controller]\nid = \"a\"\nlease_ttl = \"2s\"\n[[databases]]\nname = \"app\"\n[[databases.routers]]\nid = \"r\"\n"))
	f.Add([]byte("[store]\nkind = \"tikv\"\npd = [\"a:1\"]\n"))
	f.Add([]byte("[[fencing]]\nname = \"s\"\naddrs = [\"x:1\"]\nlease_ttl = \"1s\"\n"))
	f.Add([]byte("[[fencing]]\nname = \"s\"\naddrs = [\"x:1\"]\npods = [\"relay-0\", \"relay-1\"]\n"))
	f.Add([]byte("[lsn]\ninterval = \"5ms\"\n[[lsn.endpoints]]\nhost = \"a\"\nport = 5433\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig("fuzz.toml", data)
		if err == nil && c == nil {
			t.Fatal("no config and no error")
		}
	})
}

// TestTokenFileMustBePrivate: a token file others can read is refused, naming the fix.
func TestTokenFileMustBePrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ops.token")
	require.NoError(t, os.WriteFile(path, []byte("0123456789abcdef0123\n"), 0o644))
	text := fmt.Sprintf("[[credentials]]\nname = \"ops\"\nrole = \"operator\"\ntoken_file = %q\n", path)
	_, err := ParseConfig("loam.toml", []byte(text))
	require.ErrorContains(t, err, "credentials[0].token_file: "+path+" is readable by others (mode -rw-r--r--)")
	require.ErrorContains(t, err, "chmod 600")
	require.NoError(t, os.Chmod(path, 0o600))
	c, err := ParseConfig("loam.toml", []byte(text))
	require.NoError(t, err)
	require.Equal(t, "0123456789abcdef0123", c.AcceptedCredentials()[0].Token, "the token is read trimmed")
}

// TestCutoverInstanceAttemptsReachesThePlan: databases.cutover.instance_attempts is the
// plan's cutover.Options.InstanceAttempts (what the machine retries an instance's pause and
// reload by); unset it stays 0, which the machine reads as attempts.
func TestCutoverInstanceAttemptsReachesThePlan(t *testing.T) {
	for _, c := range []struct {
		text string
		want int
	}{
		{"attempts = 3\ninstance_attempts = 1\n", 1},
		{"attempts = 4\n", 0},
	} {
		cfg, err := ParseConfig("loam.toml", []byte("[[databases]]\nname = \"app\"\n[databases.cutover]\n"+c.text))
		require.NoError(t, err)
		dc, ok := cfg.Database(adapters.DBRef{Namespace: "default", Database: "app"})
		require.True(t, ok)
		p := dc.CutoverPlan()
		require.Equal(t, c.want, p.Options.InstanceAttempts, c.text)
		require.NotZero(t, p.Options.Attempts, c.text)
	}
}

// TestCutoverReverseSettleReachesThePlan: databases.cutover.reverse_settle is the plan's
// cutover.Options.ReverseSettle; unset it is DefaultReverseSettle (above PgDog's default
// checkout_timeout, which the rendered files keep), never 0, which would open the old
// layout before the reverse's RELOAD.
func TestCutoverReverseSettleReachesThePlan(t *testing.T) {
	for _, c := range []struct {
		text string
		want int64
	}{
		{"reverse_settle = \"2s\"\n", 2000},
		{"attempts = 4\n", DefaultReverseSettle.Milliseconds()},
	} {
		cfg, err := ParseConfig("loam.toml", []byte("[[databases]]\nname = \"app\"\n[databases.cutover]\n"+c.text))
		require.NoError(t, err)
		dc, ok := cfg.Database(adapters.DBRef{Namespace: "default", Database: "app"})
		require.True(t, ok)
		require.Equal(t, c.want, dc.CutoverPlan().Options.ReverseSettle, c.text)
	}
}
