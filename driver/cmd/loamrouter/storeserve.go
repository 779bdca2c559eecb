package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"loam.dev/router/adapters/httpstore"
	"loam.dev/router/controller"
	"loam.dev/router/controller/daemon"
)

func newStoreServeCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store-serve",
		Short: "Serve the configured store over HTTP, so several controllers can share it",
		Long: `store-serve opens the store (the embedded bbolt file by default) and serves it at
--listen, so that two or more controllers (an active one and standbys, each with
store.kind = "remote") share one store, which bbolt would otherwise lock to one process.
Every call is one call on the store behind it: compare-and-set, fsync and version counters
hold across the network.

It accepts the [[credentials]] of loam.toml and refuses to start without one: controllers
need a role = "controller" credential (they write snapshots and the lease), people an
operator one. Off a loopback address it needs [tls] cert_file and key_file (reloaded on
SIGHUP); tls.client_ca_file asks every client for a certificate. The first line on stdout
is the URL.`,
		Example: `  loamrouter store-serve --config loam.toml --listen 127.0.0.1:7070 --data /var/lib/loam
  loamrouter store-serve --config loam.toml --listen 10.0.0.4:7070 --host store.example.com:7070`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			addr, _ := cmd.Flags().GetString("listen")
			hosts, _ := cmd.Flags().GetStringSlice("host")
			ls, err := daemon.Listen(c.cfg, "--listen", addr, hosts)
			if err != nil {
				return err
			}
			st, err := c.openStoreFor(cmd.Context(), true)
			if err != nil {
				ls.Close()
				return err
			}
			defer st.Close()
			go controller.KeepPruning(cmd.Context(), st, c.cfg.Retention, c.log)
			srv := ls.Serve(httpstore.Handler(st, ls.Options()), c.log)
			fmt.Fprintln(cmd.OutOrStdout(), ls.URL())
			c.log.Info("serving the store", "url", ls.URL(), "store", c.cfg.Store.Kind, "credentials", len(c.cfg.Credentials))
			<-cmd.Context().Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().String("listen", "127.0.0.1:7070", "address to serve on (port 0 picks a free one)")
	cmd.Flags().StringSlice("host", nil, "a name (host:port) clients reach the server by, beyond --listen itself; other Host headers are refused")
	return cmd
}
