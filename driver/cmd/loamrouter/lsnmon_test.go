package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/controller"
)

// serveInProcess runs `serve --config conf` in this process until the test ends, and waits
// for its /status.
func serveInProcess(t *testing.T, conf, listen string) {
	t.Helper()
	stop := serveIn(t, &cli{}, conf, nil)
	t.Cleanup(func() { require.NoError(t, stop()) })
	require.Eventually(t, func() bool {
		_, err := getStatus(listen)
		return err == nil
	}, 60*time.Second, 10*time.Millisecond, "the daemon never served /status")
}

// lsnConfig writes a loam.toml whose [lsn] lists endpoints ("host:port").
func lsnConfig(t *testing.T, dir, listen string, endpoints ...string) string {
	t.Helper()
	var b strings.Builder
	setTestTokens(t)
	fmt.Fprintf(&b, "%s\n[controller]\nid = \"ctl-lsn\"\ntoken_env = \"LOAM_TEST_OPS_TOKEN\"\nlisten = %q\n[store]\ndir = %q\n", testAuth, listen, filepath.Join(dir, "data"))
	if len(endpoints) > 0 {
		b.WriteString("[lsn]\nuser = \"postgres\"\nsslmode = \"disable\"\n")
	}
	for _, e := range endpoints {
		host, port, _ := strings.Cut(e, ":")
		fmt.Fprintf(&b, "[[lsn.endpoints]]\nhost = %q\nport = %s\n", host, port)
	}
	path := filepath.Join(dir, "loam.toml")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
	return path
}

// scrape reads /metrics into series → value, keyed as `name{labels}` exactly as served.
func scrape(t *testing.T, listen string) map[string]float64 {
	t.Helper()
	res, err := http.Get("http://" + listen + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		out[line[:i]] = v
	}
	require.NoError(t, sc.Err())
	return out
}

// lsnStats runs `lsn stats --output json` against the daemon.
func lsnStats(t *testing.T, conf string) controller.LSNView {
	t.Helper()
	out, _, err := runSplit(t, "--config", conf, "lsn", "stats", "--output", "json")
	require.NoError(t, err, out)
	var v controller.LSNView
	require.NoError(t, json.Unmarshal([]byte(out), &v), out)
	return v
}

// TestLSNMonitorUnreachableEndpoint: a server that refuses connections has a row with no
// position (NULL), counted poll errors that say why, and known=0 with no position series in
// the metrics; the CLI prints the view from the daemon, and says what to do when the daemon
// runs no monitor or no daemon answers.
func TestLSNMonitorUnreachableEndpoint(t *testing.T) {
	dir := t.TempDir()
	listen := freePort(t)
	closed := freePort(t) // nothing listens there once freePort returns
	conf := lsnConfig(t, dir, listen, closed)
	serveInProcess(t, conf, listen)
	_, port, _ := strings.Cut(closed, ":")
	var v controller.LSNView
	require.Eventually(t, func() bool {
		v = lsnStats(t, conf)
		return len(v.Rows) == 1 && v.Rows[0].PollErrors >= 3
	}, 10*time.Second, 20*time.Millisecond)
	r := v.Rows[0]
	require.Equal(t, "127.0.0.1", r.Hostname)
	require.Equal(t, port, strconv.Itoa(r.Port))
	require.Nil(t, r.LSN, "unknown progress is NULL")
	require.Nil(t, r.Position)
	require.Zero(t, r.Samples)
	require.Contains(t, r.LastError, "connect")
	require.Equal(t, int64(10), v.IntervalMS)
	require.Equal(t, int64(100), v.TimeoutMS)
	require.Equal(t, int64(60_000), v.HistoryMS)

	text, _, err := runSplit(t, "--config", conf, "lsn", "stats")
	require.NoError(t, err)
	require.Regexp(t, `hostname\s+port\s+lsn\n127\.0\.0\.1\s+`+port+`\s+NULL\n`, text)
	text, _, err = runSplit(t, "--config", conf, "lsn", "stats", "--wide")
	require.NoError(t, err)
	require.Contains(t, text, "poll errors")
	require.Contains(t, text, "(polled every 10ms, timeout 100ms, history 1m0s)")

	labels := fmt.Sprintf(`{host="127.0.0.1",port="%s"}`, port)
	m := scrape(t, listen)
	require.Equal(t, 0.0, m["loam_lsn_known"+labels])
	require.NotContains(t, m, "loam_lsn_position_bytes"+labels, "no position while unknown")
	require.GreaterOrEqual(t, m["loam_lsn_poll_errors_total"+labels], 3.0)
	require.Less(t, m["loam_lsn_sample_age_seconds"+labels], 5.0, "the poller keeps polling")

	// A daemon without [lsn], and no daemon at all.
	dir2 := t.TempDir()
	listen2 := freePort(t)
	conf2 := lsnConfig(t, dir2, listen2)
	serveInProcess(t, conf2, listen2)
	_, _, err = runSplit(t, "--config", conf2, "lsn", "stats")
	require.ErrorIs(t, err, errNoLSNMonitor)
	require.ErrorContains(t, err, "[[lsn.endpoints]]")
	_, _, err = runSplit(t, "--config", conf2, "lsn", "stats", "--addr", freePort(t))
	require.ErrorContains(t, err, "no daemon answers on")
}
