//go:build race

package scenario_test

// raceEnabled: the race detector slows the single-threaded simulator five to ten times, so
// the sweeps that need volume (coverage, exhaustive) run only in the build without it, which
// `make test` runs as well (see the package doc of scenario).
const raceEnabled = true
