package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/boltstore"
	"loam.dev/router/adapters/httpstore"
	"loam.dev/router/adapters/tikv"
	"loam.dev/router/controller"
	"loam.dev/router/controller/daemon"
	"loam.dev/router/driver"
)

// cli is the state every command shares: the global flags and what they open.
type cli struct {
	configPath string
	dataDir    string
	storeURL   string
	namespace  string
	output     string
	logFormat  string
	logLevel   string
	tokenEnv   string

	cfg  *controller.Config
	log  *slog.Logger
	open controller.Opener
	// store, when set, is used instead of opening one (tests: an in-process TiKV); it is
	// not closed by the commands.
	store Store
}

func newRoot() *cobra.Command { return newRootFor(&cli{}) }

// newRootFor builds the command tree around c (tests set c.open first).
func newRootFor(c *cli) *cobra.Command {
	root := &cobra.Command{
		Use:   "loamrouter",
		Short: "Keep sharded Postgres (PgDog) and MySQL (Vitess) routable and safe",
		Long: `loamrouter is Loam Router's reference daemon and CLI.

The daemon (serve) keeps every configured database's routers on the shard map record's
generation, watches for prepared transactions left in doubt, and runs cutovers and
failovers when asked; one controller is active at a time (a lease in the store), others
stand by. The other commands are for people: they read and change the store, render the
routers' files, explain where a key routes, and show what the daemon did.

The store is the embedded bbolt file in --data (./loam-data) unless loam.toml says
otherwise. While a daemon holds the embedded file, the commands reach it through the
daemon's listen address.`,
		Example: `  loamrouter map init app --example
  loamrouter locate app 42
  loamrouter render pgdog app --out ./pgdog
  loamrouter serve --config loam.toml
  loamrouter cutover status app`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			return c.setup(cmd)
		},
	}
	f := root.PersistentFlags()
	f.StringVar(&c.configPath, "config", "", "loam.toml (default: ./loam.toml when it exists)")
	f.StringVar(&c.dataDir, "data", "", "directory of the embedded store (default ./loam-data; overrides store.dir)")
	f.StringVar(&c.storeURL, "store", "", "use this store instead of the config's: http://host:port (a store server or a daemon), tikv://pd1:2379,pd2:2379, or etcd://127.0.0.1:2379 (loopback, no TLS; otherwise [store.etcd] in loam.toml)")
	f.StringVar(&c.namespace, "namespace", "default", "namespace of the records (they live under xs/<namespace>/<db>)")
	f.StringVarP(&c.output, "output", "o", "text", "output format: text or json")
	f.StringVar(&c.logFormat, "log-format", "text", "log format on stderr: text (for a terminal) or json")
	f.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.StringVar(&c.tokenEnv, "token-env", "", "environment variable holding the token to send to the store server or daemon (default: store.token_env/token_file, controller.token_env/token_file of loam.toml)")
	root.AddCommand(newMapCmd(c), newRenderCmd(c), newLocateCmd(c), newOracleCmd(c), newAuditCmd(c),
		newCutoverCmd(c), newFailoverCmd(c), newInDoubtCmd(c), newFencingCmd(c), newServeCmd(c), newStoreServeCmd(c), newDemoCmd(c), newSimCmd(c), newLSNCmd(c))
	return root
}

// setup parses the global flags into a logger and a config.
func (c *cli) setup(cmd *cobra.Command) error {
	switch c.output {
	case "text", "json":
	default:
		return fmt.Errorf("--output %q: use text or json", c.output)
	}
	log, err := daemon.NewLogger(cmd.ErrOrStderr(), c.logFormat, c.logLevel)
	if err != nil {
		return fmt.Errorf("--log-format %q / --log-level %q: %w", c.logFormat, c.logLevel, err)
	}
	c.log = log
	slog.SetDefault(c.log)
	path := c.configPath
	if path == "" {
		if _, err := os.Stat("loam.toml"); err == nil {
			path = "loam.toml"
		}
	}
	if path != "" {
		c.cfg, err = controller.LoadConfig(path)
	} else {
		c.cfg, err = controller.ParseConfig("(defaults)", nil)
	}
	if err != nil {
		return err
	}
	if c.dataDir != "" {
		if c.cfg.Store.Kind != "bolt" {
			return fmt.Errorf("--data %s: the config's store is %s, not the embedded one (drop --data, or use --store)", c.dataDir, c.cfg.Store.Kind)
		}
		c.cfg.Store.Dir = c.dataDir
	}
	return nil
}

// Store is what every command works on: a controller's store, closed when the command ends.
type Store = daemon.Store

// openStore opens the configured store. The embedded file is locked by bbolt to one
// process: when a daemon holds it, the CLI goes through the daemon's listen address.
func (c *cli) openStore(ctx context.Context) (Store, error) { return c.openStoreFor(ctx, false) }

// openStoreFor opens the store; a daemon (own) waits longer for the embedded file's lock
// (a command may hold it for a moment) and never goes through another daemon.
func (c *cli) openStoreFor(ctx context.Context, own bool) (Store, error) {
	if c.store != nil {
		return unclosed{c.store}, nil
	}
	if u := c.storeURL; u != "" {
		if pd, ok := strings.CutPrefix(u, "tikv://"); ok {
			return tikv.Open(strings.Split(pd, ","), nil)
		}
		if eps, ok := strings.CutPrefix(u, "etcd://"); ok {
			e, err := controller.EtcdURL(eps)
			if err != nil {
				return nil, err
			}
			return controller.OpenEtcd(e)
		}
		return c.dial(u, "store.token", c.cfg.Store.TokenEnv, c.cfg.Store.TokenFile)
	}
	if c.cfg.Store.Kind == "remote" {
		return c.dial(c.cfg.Store.URL, "store.token", c.cfg.Store.TokenEnv, c.cfg.Store.TokenFile)
	}
	b, err := daemon.OpenStore(c.cfg, lockWait)
	if own && errors.Is(err, boltstore.ErrLocked) {
		// A command may hold the file for a moment; anything longer is another process
		// that owns it, which the operator must hear about now, not after the wait.
		path := filepath.Join(c.cfg.Store.Dir, "loam.db")
		c.log.Warn("the embedded store's file is locked by another process (another loamrouter on this store.dir?); waiting for it", "file", path, "wait", daemon.OwnLockWait)
		b, err = daemon.OpenStore(c.cfg, daemon.OwnLockWait)
	}
	if own {
		if err != nil && errors.Is(err, boltstore.ErrLocked) {
			return nil, fmt.Errorf("store.dir %s: %w: stop the process that holds it, or give this daemon a store.dir of its own", c.cfg.Store.Dir, err)
		}
		return b, err
	}
	if err == nil || c.cfg.Store.Kind != "bolt" {
		return b, err
	}
	if errors.Is(err, boltstore.ErrLocked) && c.cfg.Controller.Listen != "off" {
		h, herr := c.dial(c.daemonURL(), "controller.token", c.cfg.Controller.TokenEnv, c.cfg.Controller.TokenFile)
		if herr == nil {
			if _, perr := h.ListBlobs(ctx, "lease/"); perr == nil {
				c.log.Debug("the embedded store is held by a daemon; using it through its listen address", "listen", c.listenAddr())
				return h, nil
			}
		}
		if herr == nil {
			_, herr = h.ListBlobs(ctx, "lease/")
		}
		return nil, fmt.Errorf("%w (and the daemon on controller.listen %s does not answer: %v)", err, c.listenAddr(), herr)
	}
	return nil, err
}

// clientOptions are the options of a client of a store server: the token (from --token-env
// when given, else the config's key) and TLS with the configured CA.
func (c *cli) clientOptions(key, env, file string) (*httpstore.Options, error) {
	if c.tokenEnv != "" {
		env, file, key = c.tokenEnv, "", "--token-env"
	}
	return daemon.ClientOptions(c.cfg, key, env, file)
}

// dial is a client of the store server at url, with the token of key (env or file).
func (c *cli) dial(url, key, env, file string) (*httpstore.Client, error) {
	opts, err := c.clientOptions(key, env, file)
	if err != nil {
		return nil, err
	}
	return httpstore.Dial(url, opts)
}

func (c *cli) listenAddr() string { return c.cfg.Controller.Listen }

// daemonURL is the daemon's listen address as a URL: https when it serves TLS.
func (c *cli) daemonURL() string {
	if strings.HasPrefix(c.listenAddr(), "unix:") {
		return c.listenAddr()
	}
	if c.cfg.TLS.CertFile != "" {
		return "https://" + c.listenAddr()
	}
	return "http://" + c.listenAddr()
}

func (c *cli) db(name string) adapters.DBRef {
	return adapters.DBRef{Namespace: c.namespace, Database: name}
}

func (c *cli) json() bool { return c.output == "json" }

// emit prints v as indented JSON with --output json, else calls text.
func (c *cli) emit(w io.Writer, v any, text func(io.Writer) error) error {
	if c.json() {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return text(w)
}

// lockWait is how long a command waits for the embedded store's file lock before it looks
// for a daemon holding it.
const lockWait = 300 * time.Millisecond

// cliAudit is the audit log of an operator's command, signed by who ran it.
func (c *cli) audit(st adapters.BlobStore) *driver.Audit {
	who := c.who()
	return driver.NewAudit(st, func() driver.Token { return driver.Token{Holder: who} }, c.log)
}

// opener reaches databases' routers and shards (tests and the demo put their own in).
func (c *cli) opener() controller.Opener {
	if c.open != nil {
		return c.open
	}
	return controller.OpenFleet
}

// unclosed is a store whose Close is left to its owner.
type unclosed struct{ Store }

func (unclosed) Close() error { return nil }
