package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"loam.dev/router/adapters/httpstore"
)

func newStoreServeCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store-serve",
		Short: "Serve the configured store over HTTP, so several controllers can share it",
		Long: `store-serve opens the store (the embedded bbolt file by default) and serves it at
--listen, so that two or more controllers (an active one and standbys, each with
store.kind = "remote") share one store, which bbolt would otherwise lock to one process.
Every call is one call on the store behind it: compare-and-set, fsync and version counters
hold across the network. There is no encryption: keep it on a loopback or private address,
and set --token-env to require a bearer token. The first line on stdout is the URL.`,
		Example: `  loamrouter store-serve --listen 127.0.0.1:7070 --data /var/lib/loam
  LOAM_TOKEN=s3cret loamrouter store-serve --token-env LOAM_TOKEN`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			addr, _ := cmd.Flags().GetString("listen")
			tokenEnv, _ := cmd.Flags().GetString("token-env")
			st, err := c.openStoreFor(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer st.Close()
			l, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("--listen %s: %w", addr, err)
			}
			srv := &http.Server{Handler: httpstore.Handler(st, &httpstore.Options{Token: secret(tokenEnv)}), ReadHeaderTimeout: 10 * time.Second}
			fmt.Fprintf(cmd.OutOrStdout(), "http://%s\n", l.Addr())
			c.log.Info("serving the store", "url", "http://"+l.Addr().String(), "store", c.cfg.Store.Kind)
			errc := make(chan error, 1)
			go func() { errc <- srv.Serve(l) }()
			select {
			case err := <-errc:
				return err
			case <-cmd.Context().Done():
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().String("listen", "127.0.0.1:7070", "address to serve on (port 0 picks a free one)")
	cmd.Flags().String("token-env", "", "environment variable holding the bearer token clients must send")
	return cmd
}
