#!/usr/bin/env bash
# make spec: checks every Quint model under spec/ with the simulator (quint run, TypeScript
# backend: the Rust one downloads an evaluator, which CI cannot) at fixed seeds and sample counts.
#
# Each model file says what to run in comment lines the script reads:
#
#   // SPEC-CHECK: main=<module> samples=<n> steps=<k> invariants=<Inv> <Inv> ...
#       the model with every invariant: no violation in n samples of k steps (seed 1).
#   // EXPECT_VIOLATION: <Inv>            (the line right above `module <Mutant> {`)
#       the mutant module must violate exactly <Inv> (the simulator names the violated ones);
#       it is run with every invariant of the SPEC-CHECK line, up to 4n samples.
#   // SPEC-WITNESS: main=<module> <Inv>
#       <Inv> is a "never reaches X" invariant: the simulator must violate it (X is reached
#       within the bounds, so the invariants are not true by vacuity).
#   // SPEC-TEST: main=<module>
#       quint test of the module's own `run` scenarios.
#
# SPEC_SAMPLES=<n> replaces every SPEC-CHECK sample count (nightly size); SPEC_JOBS (default 2)
# runs that many checks at once; SPEC_ONLY=<file.qnt> checks one model. A failure prints the
# quint command that reproduces it. Exit status 0 only if every check passed.
set -euo pipefail
cd "$(dirname "$0")"

quint=./node_modules/.bin/quint
if [ ! -x "$quint" ]; then
  echo "spec: $PWD/node_modules is missing: run 'npm ci' in spec/ first" >&2
  exit 2
fi
jobs=${SPEC_JOBS:-2}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# One job per line: kind|file|main|expect|samples|steps|invariants
list=$out/jobs
: >"$list"
models=(${SPEC_ONLY:-*.qnt})
for f in "${models[@]}"; do
  check=$(grep -m1 '^// SPEC-CHECK:' "$f" || true)
  if [ -z "$check" ]; then
    echo "spec: $f has no '// SPEC-CHECK:' line (every model is checked)" >&2
    exit 2
  fi
  main=$(sed -n 's/.*main=\([A-Za-z0-9_]*\).*/\1/p' <<<"$check")
  samples=$(sed -n 's/.*samples=\([0-9]*\).*/\1/p' <<<"$check")
  steps=$(sed -n 's/.*steps=\([0-9]*\).*/\1/p' <<<"$check")
  invs=$(sed -n 's/.*invariants=//p' <<<"$check")
  [ -n "${SPEC_SAMPLES:-}" ] && samples=$SPEC_SAMPLES
  echo "check|$f|$main||$samples|$steps|$invs" >>"$list"
  # Mutants: the module declared right after an EXPECT_VIOLATION line.
  awk '/^\/\/ EXPECT_VIOLATION:/ { inv = $3; next }
       inv != "" && /^module / { print inv, $2 } { inv = "" }' "$f" |
    while read -r inv mod; do
      echo "mutant|$f|$mod|$inv|$((samples * 4))|$steps|$invs" >>"$list"
    done
  grep '^// SPEC-WITNESS:' "$f" | while read -r _ _ mainarg inv; do
    echo "witness|$f|${mainarg#main=}|$inv|$((samples * 4))|$steps|$inv" >>"$list"
  done
  grep '^// SPEC-TEST:' "$f" | while read -r _ _ mainarg; do
    echo "test|$f|${mainarg#main=}||||" >>"$list"
  done
done

run_one() {
  local line=$1 out=$2
  IFS='|' read -r kind f main expect samples steps invs <<<"$line"
  local log="$out/$(echo "$line" | md5sum | cut -c1-12).log"
  local start=$SECONDS cmd verdict
  if [ "$kind" = test ]; then
    cmd=("$quint" test --backend=typescript --main="$main" --seed=1 --max-samples=20 "$f")
  else
    # shellcheck disable=SC2206
    local inv=($invs)
    cmd=("$quint" run "$f" --backend=typescript --main="$main" --seed=1 --max-samples="$samples"
      --max-steps="$steps" --verbosity=2 --invariants "${inv[@]}")
  fi
  "${cmd[@]}" >"$log" 2>&1 && rc=0 || rc=$?
  local secs=$((SECONDS - start))
  # The simulator prints "(<ms>ms at <rate> traces/second)": samples run = ms × rate / 1000.
  local n
  n=$(sed -n 's/.*(\([0-9]*\)ms at \([0-9]*\) traces\/second).*/\1 \2/p' "$log" | head -1 |
    awk '{ n = int($1 * $2 / 1000 + 0.5); printf "%d", (n < 1 ? 1 : n) }')
  local violated
  violated=$(sed -n 's/^ *❌ *\([A-Za-z0-9_]*\).*/\1/p' "$log" | sort -u | tr '\n' ' ' | sed 's/ $//')
  # With a single invariant the simulator names none: the violation is of that one.
  if [ -z "$violated" ] && [ "$(wc -w <<<"$invs")" = 1 ] && grep -q '\[violation\]' "$log"; then
    violated=$invs
  fi
  case $kind in
  check | test)
    if [ $rc = 0 ]; then verdict=ok; else verdict=FAIL; fi ;;
  mutant | witness)
    if [ $rc != 0 ] && grep -q '\[violation\]' "$log"; then
      if [ "$kind" = witness ] || [ "$violated" = "$expect" ]; then
        verdict=ok
      else
        verdict="FAIL (violated '$violated', expected exactly '$expect')"
      fi
    else
      verdict="FAIL (no violation of $expect in $samples samples)"
    fi ;;
  esac
  local what="$kind $f $main"
  [ -n "$expect" ] && what="$what $expect"
  case $kind in
  check) what="$what ($samples samples x $steps steps)" ;;
  mutant | witness) if [ "$verdict" = ok ]; then what="$what (violated after ~${n:-?} samples)"; fi ;;
  esac
  if [ "$verdict" = ok ]; then
    echo "ok   ${secs}s $what"
  else
    echo "FAIL ${secs}s $what: $verdict"
    echo "     reproduce: (cd spec && ${cmd[*]})"
    tail -25 "$log" | sed 's/^/     | /'
    return 1
  fi
}
export -f run_one
export quint

start=$SECONDS
if xargs -d '\n' -P "$jobs" -I{} bash -c 'run_one "$1" "$2"' _ {} "$out" <"$list"; then
  echo "spec: every check passed ($(wc -l <"$list") runs, $((SECONDS - start))s)"
else
  echo "spec: FAILED (see above)" >&2
  exit 1
fi
