package main

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/httpstore"
	"loam.dev/router/conformance/tlstest"
	"loam.dev/router/driver"
)

// The attack suite: every attack on the control plane's network surface is tried against a
// real store-serve process and a real daemon, and must be refused with a clear error while
// nothing changes in the store (read back) or in the routers' files. Other attack files
// (the data half of issue 13) add their own cases next to this one.

// attackWorld is a store server, one daemon leading on it, and what they started with.
type attackWorld struct {
	t      *testing.T
	dir    string
	store  string // store-serve's URL
	daemon string // the daemon's API URL
	listen string
	files  string
	ctl    *proc
}

func newAttackWorld(t *testing.T) *attackWorld {
	if testing.Short() {
		t.Skip("starts processes; not in -short")
	}
	t.Setenv("LOAM_TEST_ADMIN_PW", "admin-pw")
	t.Setenv("LOAM_TEST_APP_PW", "app-pw")
	dir := t.TempDir()
	_, url := startStore(t, dir)
	w := &attackWorld{t: t, dir: dir, store: url, listen: freePort(t), files: filepath.Join(dir, "files")}
	w.daemon = "http://" + w.listen
	runBin(t, dir, "--store", url, "map", "init", "app", "--example")
	conf := daemonConfig(t, dir, "a", w.listen, url, w.files, 2*time.Second)
	w.ctl = startWith(t, binary(t), dir, "a", "serve", "--config", conf)
	c := &controllers{t: t, dir: dir, url: url, files: w.files, procs: map[string]*proc{"a": w.ctl}, listen: map[string]string{"a": w.listen}}
	c.leader(20 * time.Second)
	c.waitWritten(1, 20*time.Second)
	return w
}

// state is what an attack must not change: every blob (but the lease, which the leader
// renews, compared by holder) and the record, and the routers' files.
type state struct {
	blobs  map[string]string // key → data digest
	holder string
	record uint64
	files  map[string]string
}

func (w *attackWorld) state(t *testing.T) state {
	st := opsClient(t, w.store)
	bs, err := st.ListBlobs(t.Context(), "")
	require.NoError(t, err)
	s := state{blobs: map[string]string{}, files: map[string]string{}}
	for _, b := range bs {
		if b.Key == driver.DefaultLeaseKey {
			var l struct{ Holder string }
			require.NoError(t, json.Unmarshal(b.Data, &l))
			s.holder = l.Holder
			continue
		}
		sum := sha256.Sum256(b.Data)
		// The digest, not the version: on a loaded machine the daemon may lose and retake its
		// lease during an attack and save its push snapshot again with the same content.
		s.blobs[b.Key] = hex.EncodeToString(sum[:])
	}
	rec, err := st.Read(t.Context(), adapters.DBRef{Namespace: "default", Database: "app"})
	require.NoError(t, err)
	s.record = rec.Version
	require.NoError(t, filepath.WalkDir(w.files, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 { // the ConfigMap layout's ..data: which generation is live
			target, err := os.Readlink(p)
			s.files[p] = "-> " + target
			return err
		}
		data, err := os.ReadFile(p)
		sum := sha256.Sum256(data)
		s.files[p] = hex.EncodeToString(sum[:])
		return err
	}))
	return s
}

// unchanged checks that nothing an attack could reach changed since before: no blob is
// gone, rewritten or added but the audit entries the servers append (a refusal writes
// none; the daemon may append its own), the record's version, the lease's holder, the files.
func (w *attackWorld) unchanged(t *testing.T, before state, attack string) {
	t.Helper()
	after := w.state(t)
	for k, v := range before.blobs {
		require.Equal(t, v, after.blobs[k], "%s: blob %s changed or vanished", attack, k)
	}
	for k := range after.blobs {
		if _, ok := before.blobs[k]; !ok {
			require.True(t, strings.HasPrefix(k, driver.AuditPrefix), "%s: blob %s appeared", attack, k)
		}
	}
	require.Equal(t, before.record, after.record, "%s: the record changed", attack)
	require.Equal(t, before.holder, after.holder, "%s: the lease changed hands", attack)
	require.Equal(t, before.files, after.files, "%s: the routers' files changed", attack)
}

// raw sends one call as an attacker writes it: base is a server URL, token "" sends none.
func raw(t *testing.T, base, op, body, token string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/v1/"+op, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(data)
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestAttacks runs every attack on both servers of the store API.
func TestAttacks(t *testing.T) {
	w := newAttackWorld(t)
	// An oversized list first (it needs many blobs, which operators may write as requests):
	// the answer is one capped page, and the client still gets the whole listing by pages.
	ops := opsClient(t, w.store)
	for i := range 300 {
		_, err := ops.PutBlob(t.Context(), fmt.Sprintf("request/junk/%03d", i), 0, []byte("x"))
		require.NoError(t, err)
	}
	for _, base := range []string{w.store, w.daemon} {
		status, body := raw(t, base, "list", `{"prefix":"request/junk/","limit":1000000000}`, testOpsToken, nil)
		require.Equal(t, 200, status, body)
		var page struct {
			Blobs []json.RawMessage `json:"blobs"`
			More  bool              `json:"more"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &page))
		require.Len(t, page.Blobs, 256, "%s: a list page is capped", base)
		require.True(t, page.More)
	}
	all, err := ops.ListBlobs(t.Context(), "request/junk/")
	require.NoError(t, err)
	require.Len(t, all, 300)
	for _, b := range all {
		require.NoError(t, ops.DeleteBlob(t.Context(), b.Key, b.Version))
	}

	var auditKey string
	entries, err := driver.ReadAudit(t.Context(), ops, driver.AuditFilter{})
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	auditKey = entries[0].Key
	snap := driver.SnapshotKey("configpush", "default/app")
	tenYears := `{"holder":"mallory","ttl_ms":315360000000}`
	record := `{"namespace":"default","database":"app","expect":1,"record":"AAEC"}`
	huge := `{"key":"request/failover/default/app","data":"` + strings.Repeat("A", 2<<20) + `"}`
	attacks := []struct {
		name   string
		op     string
		body   string
		token  string
		header map[string]string
		status int
		msg    string
	}{
		{"unauthenticated read of a snapshot", "get", `{"key":"` + snap + `"}`, "", nil, 401, "missing or wrong credential"},
		{"unauthenticated list", "list", `{"prefix":""}`, "", nil, 401, "missing or wrong credential"},
		{"wrong token", "get", `{"key":"` + snap + `"}`, "not-the-token-0123456789", nil, 401, "missing or wrong credential"},
		{"token in the URL", "get?token=" + testOpsToken, `{"key":"` + snap + `"}`, "", nil, 400, "never accepted in a URL"},
		{"record overwrite without a credential", "cas", record, "", nil, 401, "missing or wrong credential"},
		{"failover injection without a credential", "put", `{"key":"request/failover/default/app","data":"` + b64(`{"shard":"s1","to":"10.6.6.6:5432"}`) + `"}`, "", nil, 401, "missing or wrong credential"},
		{"snapshot injection by an operator", "put", `{"key":"` + snap + `","expect":1,"data":"` + b64(`{}`) + `"}`, testOpsToken, nil, 403, `written by controllers only`},
		{"snapshot deletion by an operator", "delete", `{"key":"` + snap + `","expect":1}`, testOpsToken, nil, 403, `written by controllers only`},
		{"lease takeover by an operator", "put", `{"key":"lease/controller","expect":1,"data":"` + b64(tenYears) + `"}`, testOpsToken, nil, 403, "written by controllers only"},
		{"ten-year lease by a controller credential", "put", `{"key":"lease/controller","expect":1,"data":"` + b64(tenYears) + `"}`, testCtlToken, nil, 403, "outside (0, 1m0s]"},
		{"history forged by an operator", "put", `{"key":"history/cutover/default/app/00000000000000000009","data":"` + b64(`{}`) + `"}`, testOpsToken, nil, 403, "written by controllers only"},
		{"audit deletion", "delete", `{"key":"` + auditKey + `","expect":1}`, testCtlToken, nil, 403, "append-only"},
		{"audit overwrite", "put", `{"key":"` + auditKey + `","expect":1,"data":"` + b64(`{"event":"action","what":"nothing happened"}`) + `"}`, testCtlToken, nil, 403, "append-only"},
		{"cross-origin POST", "put", `{"key":"request/failover/default/app","data":"eA=="}`, testOpsToken, map[string]string{"Origin": "https://evil.example"}, 403, "Origin header"},
		{"form POST from a page", "put", `{"key":"request/failover/default/app","data":"eA=="}`, testOpsToken, map[string]string{"Content-Type": "text/plain"}, 415, "send application/json"},
		{"wrong Host (DNS rebinding)", "put", `{"key":"request/failover/default/app","data":"eA=="}`, testOpsToken, map[string]string{"Host": "evil.example:80"}, 403, "not a name this server listens as"},
		{"oversized body", "put", huge, testOpsToken, nil, 413, "larger than the server's bound of 1048576 bytes"},
	}
	for _, server := range []struct{ name, url string }{{"store-serve", w.store}, {"daemon", w.daemon}} {
		t.Run(server.name, func(t *testing.T) {
			for _, a := range attacks {
				t.Run(a.name, func(t *testing.T) {
					before := w.state(t)
					status, body := raw(t, server.url, a.op, a.body, a.token, a.header)
					require.Equal(t, a.status, status, body)
					require.Contains(t, body, a.msg)
					w.unchanged(t, before, a.name)
				})
			}
			t.Run("slow body (slowloris)", func(t *testing.T) {
				before := w.state(t)
				slowBody(t, strings.TrimPrefix(server.url, "http://"))
				w.unchanged(t, before, "slow body")
			})
		})
	}
	// /status needs a credential; /metrics and /healthz stay open.
	for path, want := range map[string]int{"/status": 401, "/metrics": 200, "/healthz": 200} {
		res, err := http.Get(w.daemon + path)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, want, res.StatusCode, path)
	}
	// The audit names who acted as the identity the server authenticated, whatever the
	// writer claims, written directly to store-serve or through the daemon's API.
	for _, base := range []string{w.store, w.daemon} {
		claim := driver.NewAudit(opsClient(t, base), func() driver.Token { return driver.Token{Holder: "cli:someone-else"} }, nil)
		require.NoError(t, claim.Append(t.Context(), driver.AuditEntry{Event: driver.AuditAction, What: "probe via " + base, Who: "test-ctl"}))
	}
	entries, err = driver.ReadAudit(t.Context(), ops, driver.AuditFilter{})
	require.NoError(t, err)
	whos := map[string]string{}
	for _, e := range entries {
		whos[e.What] = e.Who
		if e.Holder == "a" {
			require.Equal(t, "test-ctl", e.Who, "the daemon's entry %q names its credential", e.What)
		}
	}
	require.Equal(t, "test-ops", whos["probe via "+w.store], "an operator's entry names its credential, not what it claimed")
	require.Equal(t, "test-ops", whos["probe via "+w.daemon], "through the daemon too")
}

// slowBody sends a request's body a byte every 300ms, past the server's read timeout (1s
// in the test configs): the server must cut the connection off without running the call.
func slowBody(t *testing.T, addr string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	body := `{"key":"request/failover/default/app","data":"` + b64("slow") + `"}`
	_, err = fmt.Fprintf(conn, "POST /v1/put HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", addr, testOpsToken, len(body))
	require.NoError(t, err)
	start := time.Now()
	for i := 0; i < len(body); i++ {
		if _, err := conn.Write([]byte{body[i]}); err != nil {
			break // cut off
		}
		if time.Since(start) > 20*time.Second {
			t.Fatal("the server kept reading a slow body for 20s")
		}
		time.Sleep(300 * time.Millisecond)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	rest, _ := io.ReadAll(conn)
	require.NotContains(t, string(rest), "200 OK", "the slow request was answered as if read")
}

// TestServersRefuseToStartOpen: a daemon or store-serve without [[credentials]], or off a
// loopback address without TLS, exits at once with an error that says how to fix it.
func TestServersRefuseToStartOpen(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes; not in -short")
	}
	dir := t.TempDir()
	bare := filepath.Join(dir, "bare.toml")
	require.NoError(t, os.WriteFile(bare, []byte("[controller]\nlisten = \"127.0.0.1:0\"\n"), 0o600))
	setTestTokens(t)
	authed := filepath.Join(dir, "authed.toml")
	require.NoError(t, os.WriteFile(authed, []byte(testAuth), 0o600))
	unset := filepath.Join(dir, "unset.toml")
	require.NoError(t, os.WriteFile(unset, []byte("[[credentials]]\nname = \"ops\"\nrole = \"operator\"\ntoken_env = \"LOAM_SURELY_UNSET_TOKEN\"\n"), 0o600))
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"daemon without credentials", []string{"--config", bare, "--data", filepath.Join(dir, "d1"), "serve"}, "has no [[credentials]]"},
		{"store-serve without credentials", []string{"--config", bare, "--data", filepath.Join(dir, "d2"), "store-serve", "--listen", "127.0.0.1:0"}, "has no [[credentials]]"},
		{"store-serve off loopback without TLS", []string{"--config", authed, "--data", filepath.Join(dir, "d3"), "store-serve", "--listen", "0.0.0.0:0"}, "is not a loopback address: serving it needs TLS"},
		{"a credential's variable unset", []string{"--config", unset, "store-serve", "--listen", "127.0.0.1:0"}, "credentials[0].token_env: the environment variable LOAM_SURELY_UNSET_TOKEN is empty or unset"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(binary(t), c.args...)
			cmd.Dir = dir
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			done := make(chan error, 1)
			require.NoError(t, cmd.Start())
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				require.Error(t, err)
				require.Contains(t, stderr.String(), c.want)
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatalf("still running: it started open\n%s", stderr.String())
			}
		})
	}
}

// TestTLSStoreAndStandby: store-serve with TLS (and mutual TLS), a daemon that reaches it
// with the CA file and a client certificate, the CLI the same; a plaintext or untrusted
// client gets nothing; SIGHUP serves a renewed certificate without a restart.
func TestTLSStoreAndStandby(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes; not in -short")
	}
	setTestTokens(t)
	t.Setenv("LOAM_TEST_ADMIN_PW", "admin-pw")
	t.Setenv("LOAM_TEST_APP_PW", "app-pw")
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "loam test CA")
	certFile, keyFile := ca.Server("store")
	cc, ck := ca.Client("ctl-a")
	// store-serve reads its cert from fixed paths, so a renewal is a copy over them.
	srvCert, srvKey := filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	copyFile(t, certFile, srvCert)
	copyFile(t, keyFile, srvKey)
	tlsBlock := fmt.Sprintf("\n[tls]\ncert_file = %q\nkey_file = %q\nclient_ca_file = %q\nca_file = %q\nclient_cert_file = %q\nclient_key_file = %q\n", srvCert, srvKey, ca.File, ca.File, cc, ck)
	p, url := startStoreConf(t, dir, testAuth+tlsBlock)
	conf := filepath.Join(dir, "store.toml")
	require.True(t, strings.HasPrefix(url, "https://"), url)

	// The CLI over TLS, with the CA and its client certificate from the config.
	runBin(t, dir, "--config", conf, "--token-env", "LOAM_TEST_OPS_TOKEN", "--store", url, "map", "init", "app", "--example")
	// Plaintext to the TLS port, and TLS without the CA: refused.
	status, body := raw(t, strings.Replace(url, "https://", "http://", 1), "list", "{}", testOpsToken, nil)
	require.Equal(t, 400, status, "a plaintext request to the TLS port: %s", body)
	untrusted, _ := httpstore.Dial(url, &httpstore.Options{Token: testOpsToken})
	_, err := untrusted.ListBlobs(t.Context(), "")
	require.ErrorContains(t, err, "certificate")

	// A daemon on the TLS store: it leads and pushes generation 1.
	listen := freePort(t)
	files := filepath.Join(dir, "files")
	dconf := daemonConfig(t, dir, "a", listen, url, files, 2*time.Second)
	data, err := os.ReadFile(dconf)
	require.NoError(t, err)
	clientBlock := fmt.Sprintf("\n[tls]\nca_file = %q\nclient_cert_file = %q\nclient_key_file = %q\n", ca.File, cc, ck)
	require.NoError(t, os.WriteFile(dconf, append(data, clientBlock...), 0o600))
	d := startWith(t, binary(t), dir, "a", "serve", "--config", dconf)
	c := &controllers{t: t, dir: dir, url: url, files: files, procs: map[string]*proc{"a": d}, listen: map[string]string{"a": listen}}
	c.leader(20 * time.Second)
	require.Eventually(t, func() bool { return c.generationWritten() >= 1 }, 20*time.Second, 10*time.Millisecond, "the daemon on the TLS store never pushed:\n%s", d.log())

	// SIGHUP: a renewed certificate (another serial) is served to new connections.
	serial := func() string {
		cliConf, err := httpstore.ClientTLS(ca.File, cc, ck)
		require.NoError(t, err)
		conn, err := tls.Dial("tcp", strings.TrimPrefix(url, "https://"), cliConf)
		require.NoError(t, err)
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	first := serial()
	renewed, renewedKey := ca.Server("store")
	copyFile(t, renewed, srvCert)
	copyFile(t, renewedKey, srvKey)
	require.Equal(t, first, serial(), "the certificate changed without a SIGHUP")
	p.signal(syscall.SIGHUP)
	require.Eventually(t, func() bool { return serial() != first }, 10*time.Second, 20*time.Millisecond, "SIGHUP did not reload the certificate:\n%s", p.log())
	require.Contains(t, p.log(), "certificate reloaded")
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, data, 0o600))
}
