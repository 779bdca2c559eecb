// Command loamrouter is Loam Router's reference daemon and CLI, one binary.
//
// serve runs the controller (config pushes on every generation change, the in-doubt
// monitor, cutovers and failovers when asked) with one active controller per store, and the
// causal-read LSN monitor when loam.toml lists servers under [[lsn.endpoints]]; store-serve
// shares a store between controllers; the other commands are for people: map
// init|show|validate|apply, render pgdog|vschema, locate, cutover plan|start|status|
// finalize|rollback, failover, indoubt list, fencing status|advance|enable, lsn stats,
// audit, oracle, sim (the deterministic simulator's scenarios) and demo. Every command's
// --help has an example; --output json is for scripts and --log-format json for log
// collectors. Configuration is loam.toml (see serve --help).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRoot().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "loamrouter:", err)
		os.Exit(exitCode(err))
	}
}

// exitCode is 1, or the code an error asks for (sim exits 3 when a seed failed, so a script
// can tell a found bug from a run that could not happen).
func exitCode(err error) int {
	var coder interface{ ExitCode() int }
	if errors.As(err, &coder) {
		return coder.ExitCode()
	}
	return 1
}
