package main

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"loam.dev/router/adapters/httpstore"
)

// The tests' credentials: an operator and a controller token, made up for the tests (they
// guard only servers on 127.0.0.1 that live as long as a test).
const (
	testOpsToken = "test-operator-token-0123456789"
	testCtlToken = "test-controller-token-012345678"
)

// testAuth is the [[credentials]] block of every test config whose daemon or store server
// listens; it goes at the end of the file (after it, keys would belong to the table).
const testAuth = `
[[credentials]]
name = "test-ops"
role = "operator"
token_env = "LOAM_TEST_OPS_TOKEN"

[[credentials]]
name = "test-ctl"
role = "controller"
token_env = "LOAM_TEST_CTL_TOKEN"
`

// setTestTokens puts the tokens of testAuth in the environment (child processes inherit it).
func setTestTokens(t *testing.T) {
	t.Setenv("LOAM_TEST_OPS_TOKEN", testOpsToken)
	t.Setenv("LOAM_TEST_CTL_TOKEN", testCtlToken)
}

// opsClient is an operator's client of a store server or daemon.
func opsClient(t *testing.T, url string) *httpstore.Client {
	t.Helper()
	c, err := httpstore.Dial(url, &httpstore.Options{Token: testOpsToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// withOpsToken adds the operator's token to a request.
func withOpsToken(r *http.Request) *http.Request {
	tok := os.Getenv("LOAM_TEST_OPS_TOKEN")
	if tok == "" {
		tok = testOpsToken
	}
	r.Header.Set("Authorization", "Bearer "+tok)
	return r
}

// daemonTOML is the loam.toml of a test daemon, in the one shape the tests share:
// [controller] (id, listen, the operator token the CLI sends, lease_ttl when set, then
// Controller's lines), [store] (Store's body), the tables in Tables, database "app" (its
// files_dir when set, the application login, then DB: more keys of it and its own tables),
// and testAuth last.
type daemonTOML struct {
	ID, Listen string
	LeaseTTL   string // "" keeps the default
	Controller string // more [controller] lines
	Store      string // the [store] body
	Tables     string // tables between [store] and [[databases]]: [alerts], [lsn]
	FilesDir   string // "" leaves files_dir out
	DB         string // the rest of database "app": keys, then tables ([databases.indoubt] …)
}

// pgdogFleetKeys are the database keys of a PgDog fleet reached without TLS, with the admin
// password the tests set (setFleetSecrets).
const pgdogFleetKeys = "admin_password_env = \"LOAM_TEST_ADMIN_PW\"\ninsecure = true\n"

// indoubtOff switches the in-doubt monitor off for database "app".
const indoubtOff = "[databases.indoubt]\nenabled = false\n"

func (c daemonTOML) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "[controller]\nid = %q\nlisten = %q\ntoken_env = \"LOAM_TEST_OPS_TOKEN\"\n", c.ID, c.Listen)
	if c.LeaseTTL != "" {
		fmt.Fprintf(&b, "lease_ttl = %q\n", c.LeaseTTL)
	}
	fmt.Fprintf(&b, "%s\n[store]\n%s\n%s\n[[databases]]\nname = \"app\"\n", c.Controller, strings.TrimSuffix(c.Store, "\n"), c.Tables)
	if c.FilesDir != "" {
		fmt.Fprintf(&b, "files_dir = %q\n", c.FilesDir)
	}
	b.WriteString("app_user = \"app\"\napp_password_env = \"LOAM_TEST_APP_PW\"\n")
	b.WriteString(c.DB)
	b.WriteString(testAuth)
	return b.String()
}

// write writes the config to path (0600, it names secrets' variables) and returns path.
func (c daemonTOML) write(t *testing.T, path string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(c.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// dirStore is the [store] body of the embedded store in dir.
func dirStore(dir string) string { return fmt.Sprintf("dir = %q", dir) }
