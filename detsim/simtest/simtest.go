// Package simtest is what the simulator's tests share: the replay flags every test binary
// under detsim/ accepts (so `go test ./detsim/... -seed=N` works in every package), the
// SIM_SEEDS budget, the regression corpus, and the check that turns a failing run into a
// shrunk, self-contained report.
package simtest

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The replay flags. A failure report prints the command line that sets them.
var (
	Seed     = flag.Uint64("seed", 0, "detsim: run only this seed in TestSim (0: the corpus and fresh seeds)")
	Schedule = flag.String("schedule", "", "detsim: replay this schedule (ops=...;faults=..., from a failure report) with -seed")
	Mutant   = flag.String("mutant", "", "detsim: run the scenario with this mutant (with -seed)")
	Trace    = flag.String("simtrace", "", "detsim: with -seed, write the run's trace (JSON lines) to this file")
)

// ErrBadCorpus is wrapped by the corpus parser's errors.
var ErrBadCorpus = errors.New("simtest: bad corpus file")

// SeedsFromEnv returns SIM_SEEDS (fresh seeds per scenario), or dflt when unset.
func SeedsFromEnv(dflt int) (int, error) {
	v := os.Getenv("SIM_SEEDS")
	if v == "" {
		return dflt, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("simtest: SIM_SEEDS=%q is not a non-negative integer", v)
	}
	return n, nil
}

// BaseSeed returns SIM_SEED_BASE, or a fresh random base when unset: fresh seeds are
// base, base+1, ... and a report names the seed, so a fresh failure replays with -seed.
func BaseSeed() (uint64, error) {
	if v := os.Getenv("SIM_SEED_BASE"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("simtest: SIM_SEED_BASE=%q is not an unsigned integer", v)
		}
		return n, nil
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]) >> 16, nil // small enough to type
}

// Entry is one corpus seed: a run that once failed (or exercises a rare path) and must
// pass for ever. Files are testdata/corpus/*.seed at the module root and are never removed.
type Entry struct {
	File     string
	Scenario string
	Seed     uint64
	Schedule string // optional: a shrunk schedule to replay instead of the seed's own
	Why      string // the '#' comment lines
}

// ParseEntry reads one corpus file:
//
//	# why this seed is here (one or more comment lines)
//	scenario cutover
//	seed 1234
//	schedule ops=0,3;faults=pgdog.crash#2   (optional)
func ParseEntry(name string, data []byte) (Entry, error) {
	e := Entry{File: name}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	seen := map[string]bool{}
	line := 0
	for sc.Scan() {
		line++
		t := strings.TrimSpace(sc.Text())
		if t == "" {
			continue
		}
		if strings.HasPrefix(t, "#") {
			e.Why = strings.TrimSpace(e.Why + " " + strings.TrimSpace(strings.TrimPrefix(t, "#")))
			continue
		}
		key, val, _ := strings.Cut(t, " ")
		val = strings.TrimSpace(val)
		if seen[key] {
			return Entry{}, fmt.Errorf("%w: %s:%d: %q appears twice", ErrBadCorpus, name, line, key)
		}
		seen[key] = true
		switch key {
		case "scenario":
			if val == "" {
				return Entry{}, fmt.Errorf("%w: %s:%d: scenario needs a name", ErrBadCorpus, name, line)
			}
			e.Scenario = val
		case "seed":
			n, err := strconv.ParseUint(val, 10, 64)
			if err != nil {
				return Entry{}, fmt.Errorf("%w: %s:%d: seed %q is not an unsigned integer", ErrBadCorpus, name, line, val)
			}
			e.Seed = n
		case "schedule":
			e.Schedule = val
		default:
			return Entry{}, fmt.Errorf("%w: %s:%d: unknown key %q (want scenario, seed, schedule or # comments)", ErrBadCorpus, name, line, key)
		}
	}
	if !seen["scenario"] || !seen["seed"] {
		return Entry{}, fmt.Errorf("%w: %s: needs a scenario line and a seed line", ErrBadCorpus, name)
	}
	if e.Why == "" {
		return Entry{}, fmt.Errorf("%w: %s: say why the seed is in the corpus in a # comment", ErrBadCorpus, name)
	}
	return e, nil
}

// RepoRoot finds the module root (the directory holding go.mod) from the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("simtest: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Corpus reads testdata/corpus/*.seed from the module root, sorted by file name.
func Corpus() ([]Entry, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(root, "testdata", "corpus", "*.seed"))
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	var out []Entry
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		e, err := ParseEntry(filepath.Base(f), data)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}
