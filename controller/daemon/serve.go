package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"loam.dev/router/adapters/httpstore"
	"loam.dev/router/controller"
)

// Options are what a binary plugs into Serve.
type Options struct {
	// Log is the daemon's logger (default slog.Default()).
	Log *slog.Logger
	// Open reaches each database's routers, shards and files target (default
	// controller.OpenFleet). The Kubernetes binary gives one that writes the ConfigMap.
	Open controller.Opener
}

// Serve runs the daemon of cfg on st until it is drained or stopped: the controller
// (controller.New, Run), the LSN monitor, retention, and controller.listen. ctx ending
// starts the drain: nothing new starts, commands in flight finish and are recorded, the
// lease is released; a SIGINT or SIGTERM after that, or controller.drain_timeout passing,
// stops at once. It returns nil once drained or stopped that way. It does not close st.
func Serve(ctx context.Context, cfg *controller.Config, st Store, o Options) error {
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	drain := ctx.Done()
	hard, stopHard := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHard()
	go func() {
		<-drain
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(sigs)
		log.Info("draining: starting nothing new; a second signal stops at once", "timeout", cfg.Controller.DrainTimeout.Or(controller.DefaultDrainTimeout))
		t := time.NewTimer(cfg.Controller.DrainTimeout.Or(controller.DefaultDrainTimeout))
		defer t.Stop()
		select {
		case <-sigs:
			log.Warn("second signal: stopping without waiting for the commands in flight")
		case <-t.C:
			log.Warn("drain timeout: stopping without waiting for the commands in flight")
		case <-hard.Done():
		}
		stopHard()
	}()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts := []controller.Option{controller.WithStore(st), controller.WithLogger(log), controller.WithRegisterer(reg)}
	if o.Open != nil {
		opts = append(opts, controller.WithFleets(o.Open))
	}
	d, err := controller.New(*cfg, opts...)
	if err != nil {
		return err
	}
	context.AfterFunc(ctx, d.Drain)
	lsnMon, err := controller.StartLSNMonitor(cfg.LSN, log)
	if err != nil {
		return err
	}
	if lsnMon != nil {
		defer lsnMon.Close()
		reg.MustRegister(lsnMon)
	}

	if cfg.Controller.Listen != "off" {
		ls, err := Listen(cfg, "controller.listen", cfg.Controller.Listen, cfg.Controller.Hosts)
		if err != nil {
			return err
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
		mux.Handle("/status", httpstore.Authenticate(ls.opts, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(Status{Status: d.Status(), PID: os.Getpid(), LSN: lsnMon.View()})
		})))
		mux.Handle("/v1/", httpstore.Handler(st, ls.opts))
		srv := ls.Serve(mux, log)
		defer srv.Close()
		log.Info("listening", "url", ls.URL(), "paths", "/metrics /healthz (open) /status /v1/ (store; credential needed)", "credentials", len(cfg.Credentials))
	}
	if cfg.Store.Kind != "remote" { // the store server prunes a remote store
		go controller.KeepPruning(hard, st, cfg.Retention, log)
	}
	log.Info("controller starting", "id", cfg.Controller.ID, "store", cfg.Store.Kind, "databases", len(cfg.Databases))
	err = d.Run(hard)
	if errors.Is(err, context.Canceled) && hard.Err() != nil {
		return nil
	}
	return err
}

// Status is /status: the controller's, the process's id, and the LSN monitor's
// stats_pgsql_lsn view when it runs one.
type Status struct {
	controller.Status
	PID int                 `json:"pid"`
	LSN *controller.LSNView `json:"lsn,omitempty"`
}

// NewLogger is a daemon's logger on w: format text (for a terminal) or json (for a log
// collector), at level debug, info, warn or error. The errors name the value given.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: use text or json", format)
}
