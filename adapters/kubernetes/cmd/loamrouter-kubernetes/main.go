// Command loamrouter-kubernetes is the controller daemon of `loamrouter serve` for a
// control plane on Kubernetes: the same daemon (package controller/daemon: the lease on
// the store, ConfigPush, the in-doubt monitor, cutovers and failovers, the authenticated
// listener, the drain on SIGTERM), with the databases whose [databases.target] kind is
// "kubernetes" pushed into their ConfigMap and Secret through the Kubernetes API
// (adapters/kubernetes.Target: compare-and-set on resourceVersion, the generation
// annotation, never backwards), each RELOAD waiting until the pod sees the files when
// the routers give config_dir, and the in-doubt monitor's roster read from the PgDog
// StatefulSet's pods when target.pods is set.
//
// It is a binary of its own, in the module loam.dev/router/adapters/kubernetes, so that
// loamrouter and every importer of loam.dev/router do not link client-go.
//
//	loamrouter-kubernetes --config /etc/loam/loam.toml
//	loamrouter-kubernetes --config loam.toml --kubeconfig ~/.kube/config --log-format json
//
// In a pod it reaches the API server as its service account; elsewhere through
// --kubeconfig (default $KUBECONFIG, then ~/.kube/config). Configuration is loam.toml as
// for `loamrouter serve --help`, plus [databases.target]: kind, namespace, configmap,
// secret, pods, container. The commands (map, cutover, failover, audit, ...) are
// loamrouter's: point them at this daemon's store or listen address.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"loam.dev/router/adapters/kubernetes"
	"loam.dev/router/controller"
	"loam.dev/router/controller/daemon"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "loamrouter-kubernetes:", err)
		code := 1
		if errors.Is(err, flag.ErrHelp) {
			code = 0
		}
		os.Exit(code)
	}
}

// run is the daemon until ctx ends (the drain) and it has stopped.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("loamrouter-kubernetes", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "loam.toml", "loam.toml (see `loamrouter serve --help`; [databases.target] kind = \"kubernetes\" for the ConfigMap target)")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, else the pod's service account)")
	logFormat := fs.String("log-format", "text", "log format on stderr: text or json")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: the daemon takes flags only (the commands are loamrouter's)", fs.Arg(0))
	}
	log, err := daemon.NewLogger(stderr, *logFormat, *logLevel)
	if err != nil {
		return err
	}
	cfg, err := controller.LoadConfig(*config)
	if err != nil {
		return err
	}
	open, err := opener(cfg, *kubeconfig)
	if err != nil {
		return err
	}
	st, err := daemon.OpenStore(cfg, daemon.OwnLockWait)
	if err != nil {
		return err
	}
	defer st.Close()
	return daemon.Serve(ctx, cfg, st, daemon.Options{Log: log, Open: open})
}

// opener connects to the API server when a database needs it (none of kind kubernetes:
// no connection, the daemon is loamrouter serve).
func opener(cfg *controller.Config, kubeconfig string) (controller.Opener, error) {
	need := false
	for _, db := range cfg.Databases {
		need = need || db.Target.Kind == controller.TargetKubernetes
	}
	if !need {
		return nil, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w (outside a pod, give a kubeconfig file)", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: the namespace: %w", err)
	}
	client, err := k8s.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	return kubernetes.Fleets(client, cfg, ns)
}
