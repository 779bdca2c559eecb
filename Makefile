# Loam Router. `make test` is the README's test command; `.ci/run` calls it.
GO       ?= go
PKGS     ?= ./...
FUZZTIME ?= 10s
BENCH    ?= .

# The main module is built and tested as its importers get it: alone, on its own go.mod
# (GOWORK=off, exported to every go command and to the tests that run go themselves). The
# nested modules that import it (NESTED) are built in the workspace of go.work, which
# serves this tree as the release they require (see README, "Importing the modules").
export GOWORK := off
WORKSPACE := GOWORK=$(CURDIR)/go.work
NESTED    := $(filter-out .,$(patsubst ./%,%,$(shell awk '/^use \(/{u=1;next} u&&/^\)/{u=0} u{print $$1}' go.work)))

.PHONY: test bench fuzz lint demo sim proof spec mutate

# Every package, race detector on. Tests that need Postgres or Redis start their own servers
# on 127.0.0.1 in temp dirs from the binaries on this machine; they skip with
# "skipped: needs <thing>" when a binary is missing, unless LOAM_REQUIRE_REAL=1 (set by
# .ci/run), which turns every such skip into a failure.
test:
	@if command -v coqc >/dev/null && command -v ocamlfind >/dev/null; then $(MAKE) --no-print-directory proof; \
	  else echo "make test: no coqc/ocamlfind, so no proof oracle (its tests skip, or fail under LOAM_REQUIRE_REAL=1)"; fi
	$(GO) test -race -count=1 -timeout 30m $(PKGS)
	$(GO) test -count=1 -timeout 30m ./detsim/...
	$(GO) test -count=1 -timeout 30m -tags $(MUTANT_TAGS) ./machine/indoubt/ ./driver/
	$(GO) test -count=1 -timeout 30m -tags $(MUTANT_TAGS) -run 'TestMutants|TestExplore' ./detsim/scenario/
	$(GO) test -count=1 -timeout 30m -tags $(MUTANT_TAGS) -run 'TestModelReplayCrossShardCommitMutant$$' ./spec/
	@set -e; for mod in $(NESTED); do echo "== $$mod (workspace)"; (cd $$mod && $(WORKSPACE) $(GO) test -count=1 -timeout 30m ./...); done
	$(MAKE) spec

# --- spec (Quint models, spec/README in spec/run.sh) ---
# Every model's invariants at fixed seeds and samples, every EXPECT_VIOLATION mutant, every
# witness and every model's own `quint test` scenarios. Needs `npm ci` in spec/ (.ci/run does
# it). SPEC_SAMPLES=<n> for the nightly size.
spec:
	spec/run.sh
# --- end spec ---

# The nested modules (Vitess and client-go code, kept out of the main go.mod) require
# loam.dev/router at its next release (internal/modproxy.NextRelease) with no replace; go.work
# serves that version from this tree. A new dependency of the main module reaches them
# through the workspace, whose go.work.sum holds the checksums their own go.sum lacks.

# Build tags that compile deliberately broken variants, never part of the default build; the
# tests under them show each break is caught.
MUTANT_TAGS ?= loam_mutant_indoubt_commit

# The deterministic simulator at nightly size: SIM_SEEDS fresh seeds per scenario on every
# core, with a progress line. A failure prints its seed, options and shrunk schedule, and the
# command that replays it. (make test runs the corpus and a small number of fresh seeds.)
SIM_SEEDS ?= 1000000
sim:
	SIM_SEEDS=$(SIM_SEEDS) $(GO) test -count=1 -timeout 0 -run TestSim ./detsim/scenario/

bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem $(PKGS)
	cd conformance/vitessdiff && $(WORKSPACE) $(GO) test -run '^$$' -bench '$(BENCH)' -benchmem ./...

# A short run of every fuzz target (FUZZTIME each).
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; \
	    $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done
	@set -e; for mod in $(NESTED); do \
	  for pkg in $$(cd $$mod && $(WORKSPACE) $(GO) list ./...); do \
	    for f in $$(cd $$mod && $(WORKSPACE) $(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	      echo "== $$pkg $$f"; \
	      (cd $$mod && $(WORKSPACE) $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$pkg); \
	    done; \
	  done; \
	done

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	@set -e; for mod in $(NESTED); do (cd $$mod && $(WORKSPACE) $(GO) vet ./...); done

# The main job: build the binary, then move a shard with the fenced cutover on local Postgres
# servers under a write load (see README). It cleans up everything it started, also on Ctrl-C.
# With the Vitess programs built (LOAM_VITESS_BIN, conformance/vitesstest/vitessbin/build.sh),
# `make demo VITESS=1` (or `loamrouter demo --vitess`) shows the Vitess half instead: the
# controller reshards a keyspace 0 -> -80,80- on a throwaway Vitess under writes through vtgate.
demo:
	$(GO) build -o $${TMPDIR:-/tmp}/loamrouter ./driver/cmd/loamrouter
	$${TMPDIR:-/tmp}/loamrouter demo $(if $(VITESS),--vitess)
	@$(if $(VITESS),true,echo "the Vitess half: make demo VITESS=1 (needs LOAM_VITESS_BIN: conformance/vitesstest/vitessbin/build.sh)")

# ---- proof (issue 19): the Coq model of kernel/merge, its theorems and the extracted oracle ----
# Debian's coq, ocaml-nox, ocaml-findlib and libyojson-ocaml-dev. Everything is built in
# proof/_build (ignored by git): the compiled theories, one Print Assumptions file per main
# theorem (checked by proof/assumptions_test.go), the extracted OCaml and the oracle binary
# loam-router-oracle that kernel/merge's differential test runs.
PROOF_BUILD ?= proof/_build
PROOF_THEORIES = Values Merge Aggregate Partition Decompose Extract Assumptions
proof:
	rm -rf $(PROOF_BUILD) && mkdir -p $(PROOF_BUILD)/assumptions
	cp proof/*.v proof/oracle.ml $(PROOF_BUILD)/
	cd $(PROOF_BUILD) && for t in $(PROOF_THEORIES); do coqc -Q . Loam $$t.v || exit 1; done
	cd $(PROOF_BUILD) && ocamlfind ocamlopt -package yojson -linkpkg oracle_core.mli oracle_core.ml oracle.ml -o loam-router-oracle
# ---- end proof ----

# ---- mutate (issue 20): mutation testing over the machines, nightly size, not in CI ----
# go-gremlins (pinned, run from the module proxy; not a dependency of go.mod) plants ordinary
# mistakes (a flipped comparison, a boundary off by one, + for -) in one package at a time
# and runs that package's tests. A mutant counts as killed only by a semantic test: the
# golden comparisons are skipped by name (GOFLAGS -skip: the interaction scripts,
# TestInteraction and fencemigrate's TestScenarios, and the Example funcs' printed output),
# since a golden whose text changes is blessed by -rewrite. The properties, world tests,
# restart sweeps, in-package simulations and the explorer stay. A mutant no remaining test
# covers is reported NOT COVERED: count it a survivor. MUTATE_PKGS=./machine/indoubt to run one.
# Printed per mutant: LIVED and NOT COVERED (and TIMED OUT); the JSON per package lands in
# MUTATE_OUT. It takes hours on 2 loaded cores (cutover alone has ~600 mutants).
# The triage of what survives (mutants per package, which are equivalent and why, which
# gremlins cannot see and were checked by hand) is machine/MUTATION.md: re-check it there.
# gremlins mutates every file under the directory it is given, subpackages too, and runs only
# that package's tests: -E / keeps each run to the package's own files (./machine alone
# would otherwise report the whole tree's mutants as surviving its tests).
# Do not pass gremlins --test-cpu: v0.6.0 hands "-cpu N" to go test as one argument, every
# run fails to start and every mutant is reported KILLED.
# MUTATE_DIFF=<rev> mutates only the lines added or changed since <rev> (gremlins' -D <rev>:
# the lines `git diff --merge-base <rev>` adds, working tree included); a package with no
# change since <rev> is skipped (to gremlins an empty diff selects every mutant). gremlins
# v0.6.0's diff mode has two bugs: it matches the diff's repository-relative file names
# against package-relative ones, so in a subdirectory it selects nothing ("Runnable: 0"), and
# it misreads a hunk git merged from changes with context lines between them (it missed 15 of
# cutover's 93 mutants). internal/mutategit/git, put first on gremlins' PATH, works around
# both: it rewrites that one call into `git diff -U0 --relative=$MUTATE_REL --merge-base
# <rev>` (MUTATE_REL: the package's directory with a trailing slash, set per package here)
# and runs every other git call unchanged. See machine/MUTATION.md, "The command".
GREMLINS    ?= $(GO) run github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0
MUTATE_PKGS ?= ./machine ./machine/causal ./machine/configpush ./machine/cutover ./machine/failover \
               ./machine/fencemigrate ./machine/indoubt ./machine/vreshard ./kernel/fencing
MUTATE_SKIP ?= ^(Example|TestInteraction$$|TestScenarios$$)
MUTATE_OUT  ?= $${TMPDIR:-/tmp}/loam-mutate
MUTATE_DIFF ?=
mutate:
	@mkdir -p $(MUTATE_OUT); set -e; \
	$(if $(MUTATE_DIFF),git rev-parse -q --verify '$(MUTATE_DIFF)^{commit}' >/dev/null \
	  || { echo "make mutate: MUTATE_DIFF=$(MUTATE_DIFF) is no commit" >&2; exit 2; };) \
	for p in $(MUTATE_PKGS); do \
	  echo "== $$p"; \
	  $(if $(MUTATE_DIFF),rel=$${p#./}; rel=$${rel%/}/; [ "$$rel" != ./ ] || rel=; \
	    if git diff --quiet --merge-base '$(MUTATE_DIFF)' -- "./$$rel"; then echo "no change since $(MUTATE_DIFF)"; continue; fi;) \
	  $(if $(MUTATE_DIFF),MUTATE_REL="$$rel" PATH="$(CURDIR)/internal/mutategit:$$PATH") \
	  GOFLAGS="$$($(GO) env GOFLAGS) -skip=$(MUTATE_SKIP)" $(GREMLINS) unleash --timeout-coefficient 10 -E / \
	    -S lct $(if $(MUTATE_DIFF),-D '$(MUTATE_DIFF)') -o $(MUTATE_OUT)/$$(echo $$p | tr ./ _).json $$p; \
	done
# ---- end mutate ----
