// Package vitessdiff checks Loam Router against Vitess's own code (vitess.io/vitess v0.24.4):
// kernel/vindex's hash and xxhash vindexes against Vitess's vindexes on random inputs, and
// what kernel/render writes for Vitess (vtgate's static auth file, the VSchema) against the
// parsers and validators vtgate and vtctld run. It is a module of its own so that the
// router's go.mod never depends on Vitess; only its tests do anything. Run it with
// `cd conformance/vitessdiff && go test ./...` (make test does).
package vitessdiff
