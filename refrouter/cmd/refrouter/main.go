// Command refrouter runs one reference router instance as a process of its own, as a
// PgDog process runs: it reads pgdog.toml and users.toml from --dir, serves PgDog's admin
// database and its clients on one loopback listener (refrouter.Server), and stands in for
// PgDog's resharding commands with Postgres's logical replication when given a resharding
// login. A controller drives it with the PgDog adapter (loam.toml: kind = "pgdog",
// admin = the printed address, config_dir = --dir).
//
// It prints "listening <host:port>" on stdout once it serves. Signals: SIGHUP reloads the
// files (as RELOAD); SIGUSR1 cuts the control plane (admin sessions dropped, admin logins
// unanswered; clients go on) and SIGUSR2 restores it, which is how tests make an instance
// the controller cannot reach; SIGTERM and SIGINT stop it.
//
//	refrouter --id ref-1 --dir /var/lib/ref-1 --database app --user app --listen 127.0.0.1:6432
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/refrouter"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "refrouter:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("refrouter", flag.ContinueOnError)
	id := fs.String("id", "", "the instance's name (required)")
	dir := fs.String("dir", "", "the directory of pgdog.toml and users.toml (required; adapters/configmap layout)")
	database := fs.String("database", "", "the database clients use (required)")
	user := fs.String("user", "", "the user the router logs into the shards as (required; users.toml gives its password)")
	listen := fs.String("listen", "127.0.0.1:6432", "the loopback host:port of the admin database and the clients (:0 picks a port)")
	reshardUser := fs.String("reshard-user", "", "the superuser the resharding stand-in (COPY_DATA, CUTOVER) logs into shards as; empty refuses COPY_DATA")
	reshardPwEnv := fs.String("reshard-password-env", "", "the environment variable holding --reshard-user's password")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("instance", *id)
	r, err := refrouter.Open(refrouter.Options{ID: *id, Dir: *dir, Database: *database, User: *user})
	if err != nil {
		return err
	}
	defer r.Close()
	opts := refrouter.ServerOptions{Router: r, Logger: log}
	if *reshardUser != "" {
		info := url.User(*reshardUser)
		if *reshardPwEnv != "" {
			pw := os.Getenv(*reshardPwEnv)
			if pw == "" {
				return fmt.Errorf("--reshard-password-env: %s is empty or unset", *reshardPwEnv)
			}
			info = url.UserPassword(*reshardUser, pw)
		}
		opts.ReshardDSN = func(b shardmap.Backend) string {
			u := url.URL{Scheme: "postgres", User: info, Host: net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), Path: "/" + b.Database, RawQuery: "sslmode=disable"}
			return u.String()
		}
	}
	srv, err := refrouter.Listen(*listen, opts)
	if err != nil {
		return err
	}
	defer srv.Close()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTERM, syscall.SIGINT)
	fmt.Printf("listening %s\n", srv.Addr())
	log.Info("serving", "addr", srv.Addr(), "dir", *dir, "database", *database)
	for s := range sigs {
		switch s {
		case syscall.SIGHUP:
			if err := r.Reload(context.Background()); err != nil {
				log.Error("reload failed; the old files stay loaded", "err", err)
			} else {
				log.Info("reloaded")
			}
		case syscall.SIGUSR1:
			srv.SetUnreachable(true)
			log.Info("control plane cut (SIGUSR1): admin logins unanswered")
		case syscall.SIGUSR2:
			srv.SetUnreachable(false)
			log.Info("control plane restored (SIGUSR2)")
		default:
			log.Info("stopping", "signal", s.String())
			return nil
		}
	}
	return nil
}
