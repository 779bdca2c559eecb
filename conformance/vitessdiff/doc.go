// Package vitessdiff compares loam.dev/router/kernel/vindex with the vindexes of Vitess
// itself (vitess.io/vitess v0.24.4) on random inputs. It is a module of its own so that the
// router's go.mod never depends on Vitess; only its tests do anything.
package vitessdiff
