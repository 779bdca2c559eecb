// Package daemon is the controller daemon's process around a controller.Controller: the
// store it opens from loam.toml (OpenStore), the HTTP listener with its authentication and
// TLS (Listen: /metrics, /healthz, /status and the store API), the LSN monitor, retention
// and the drain on a signal (Serve).
//
// It exists so that every binary that runs the daemon runs the same one: `loamrouter
// serve` (driver/cmd/loamrouter) and `loamrouter-kubernetes` (the nested module
// adapters/kubernetes, which plugs the Kubernetes ConfigTarget and pod roster in through
// Options.Open) both call Serve, and differ only in the Opener they give it. A binary's
// front keeps its flags, its output and its commands' wording.
package daemon
