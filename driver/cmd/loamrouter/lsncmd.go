package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"loam.dev/router/controller"
)

func newLSNCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lsn",
		Short: "The causal-read LSN monitor of the running daemon",
		Example: `  loamrouter lsn stats
  loamrouter lsn stats --wide
  loamrouter lsn stats --addr 10.0.0.9:9464 --output json`,
	}
	var addr string
	var wide bool
	stats := &cobra.Command{
		Use:   "stats",
		Short: "Show stats_pgsql_lsn: one row per Postgres server, its position or NULL",
		Long: `stats reads the LSN monitor's view from the running daemon (its /status, at
controller.listen or --addr): one row per physical Postgres server of [[lsn.endpoints]], with
its latest position (the insert position of a primary, the replay position of a standby), or
NULL while its progress is unknown (the server is down, the poll timed out, a standby has
replayed nothing yet). --wide adds what the monitor retains per server (samples and bytes of
its history), the age of its latest poll, and its poll errors.`,
		Example: `  loamrouter lsn stats
  loamrouter lsn stats --wide
  loamrouter lsn stats --output json | jq '.rows[] | select(.lsn == null)'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if addr == "" {
				addr = c.listenAddr()
			}
			v, err := c.fetchLSNView(cmd.Context(), addr)
			if err != nil {
				return err
			}
			return c.emit(cmd.OutOrStdout(), v, func(w io.Writer) error { return printLSNView(w, v, wide) })
		},
	}
	stats.Flags().StringVar(&addr, "addr", "", "the daemon's listen address (default controller.listen of loam.toml)")
	stats.Flags().BoolVar(&wide, "wide", false, "also show retention, poll age and poll errors")
	cmd.AddCommand(stats)
	return cmd
}

// errNoLSNMonitor: the daemon answers but runs no monitor.
var errNoLSNMonitor = errors.New("the daemon runs no LSN monitor")

// fetchLSNView reads the view from a daemon's /status.
// /status needs a credential: the CLI's controller.token_env/token_file (or --token-env).
func (c *cli) fetchLSNView(ctx context.Context, addr string) (*controller.LSNView, error) {
	if addr == "off" {
		return nil, errors.New("controller.listen is off: the daemon serves no /status; give --addr of a daemon that listens")
	}
	opts, err := c.clientOptions("controller.token", c.cfg.Controller.TokenEnv, c.cfg.Controller.TokenFile)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	base := "http://" + addr
	tr := &http.Transport{TLSClientConfig: opts.TLSConfig}
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		base = "http://unix"
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}
	} else if c.cfg.TLS.CertFile != "" {
		base = "https://" + addr
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/status", nil)
	if err != nil {
		return nil, fmt.Errorf("--addr %q: %w", addr, err)
	}
	if opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+opts.Token)
	}
	hc := &http.Client{Transport: tr}
	res, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("no daemon answers on %s (%w): start `loamrouter serve`, or give --addr of the one that runs", addr, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		return nil, fmt.Errorf("%s/status answered %s: %s", addr, res.Status, strings.TrimSpace(string(body)))
	}
	var st struct {
		LSN *controller.LSNView `json:"lsn"`
	}
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("%s/status: %w", addr, err)
	}
	if st.LSN == nil {
		return nil, fmt.Errorf("%w on %s: list the servers under [[lsn.endpoints]] in its loam.toml and restart it", errNoLSNMonitor, addr)
	}
	return st.LSN, nil
}

// printLSNView prints the view as the proxy's table does (NULL for no position).
func printLSNView(w io.Writer, v *controller.LSNView, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "hostname\tport\tlsn"
	if wide {
		head += "\tsamples\tbytes\tage\tpoll errors\tlast error"
	}
	fmt.Fprintln(tw, head)
	for _, r := range v.Rows {
		pos := "NULL"
		if r.LSN != nil {
			pos = *r.LSN
		}
		line := fmt.Sprintf("%s\t%d\t%s", r.Hostname, r.Port, pos)
		if wide {
			age := "never polled"
			if r.AgeMS != nil {
				age = dur(*r.AgeMS)
			}
			line += fmt.Sprintf("\t%d\t%d\t%s\t%d\t%s", r.Samples, r.Bytes, age, r.PollErrors, oneLine(r.LastError))
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if wide {
		fmt.Fprintf(w, "(polled every %s, timeout %s, history %s)\n", dur(v.IntervalMS), dur(v.TimeoutMS), dur(v.HistoryMS))
	}
	return nil
}

// oneLine keeps the first line of an error, clipped for a table cell.
func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return clip(s, 100)
}
