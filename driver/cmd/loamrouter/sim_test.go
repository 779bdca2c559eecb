package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/detsim/scenario"
)

// runSplit runs one command in this process and returns its stdout and stderr apart (the
// JSON a script parses, and the progress line).
func runSplit(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.ExecuteContext(t.Context())
	return out.String(), errOut.String(), err
}

func simJSON(t *testing.T, out string) simOutput {
	t.Helper()
	var res simOutput
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	return res
}

// TestSimShortSweepPasses: a short sweep of two scenarios runs every seed of the range on
// the workers, passes, prints a final progress line per scenario, and exits 0.
func TestSimShortSweepPasses(t *testing.T) {
	out, progress, err := runSplit(t, "sim", "traffic", "push", "--seeds", "40", "--from", "1000", "--workers", "2", "--output", "json")
	require.NoError(t, err, progress)
	res := simJSON(t, out)
	require.False(t, res.Failed)
	require.Len(t, res.Scenarios, 2)
	for i, name := range []string{"traffic", "push"} {
		s := res.Scenarios[i]
		require.Equal(t, name, s.Scenario)
		require.Equal(t, uint64(1000), s.From)
		require.Equal(t, 40, s.Runs)
		require.Empty(t, s.FailedSeeds)
		require.Greater(t, s.Steps, 40*50, "every run takes steps")
		require.Contains(t, progress, "["+string(rune('1'+i))+"/2] "+name+": 40/40 seeds (100%)")
	}
	require.Contains(t, progress, "0 failing, done in")

	report := filepath.Join(t.TempDir(), "run.html")
	text, progress, err := runSplit(t, "sim", "bank", "--seeds", "10", "--report", report)
	require.NoError(t, err)
	require.Contains(t, text, "bank: 10 seeds (1..10), all passed")
	require.Contains(t, progress, "(1 run pictured)")
	page, err := os.ReadFile(report)
	require.NoError(t, err)
	require.Contains(t, string(page), "<h2>bank seed 1: passed</h2>", "without a failure, the first seed's run")
	require.Contains(t, string(page), `marker-end="url(#a-cmd)"`)

	_, _, err = runSplit(t, "sim", "push", "--seed", "5", "--seed", "6", "--report", report)
	require.NoError(t, err)
	page, err = os.ReadFile(report)
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(string(page), "<svg xmlns"), "each replayed seed drawn")
	require.Contains(t, string(page), "REPLAY   loamrouter sim push --seed 6")
}

// TestSimMutantFailsAndPictures: a mutant the checkers must catch fails the sweep (exit
// status 3), the lowest failing seeds are shrunk, printed with seed, options and replay
// commands, and drawn on the --report page with the violation marked.
func TestSimMutantFailsAndPictures(t *testing.T) {
	dir := t.TempDir()
	report := filepath.Join(dir, "failing.html")
	out, progress, err := runSplit(t, "sim", "cutover", "--mutant", scenario.MutantSkipFence, "--seeds", "30", "--shrink", "2",
		"--report", report, "--output", "json")
	var failed *simFailedError
	require.ErrorAs(t, err, &failed)
	require.Equal(t, 3, exitCode(err))
	require.Contains(t, progress, "shrinking 2 of")
	res := simJSON(t, out)
	require.True(t, res.Failed)
	require.Len(t, res.Scenarios, 1, "the sweep runs the one scenario named (the cutover worlds carry this mutant too)")
	s := res.Scenarios[0]
	require.Equal(t, "cutover", s.Scenario)
	require.NotEmpty(t, s.FailedSeeds)
	require.Len(t, s.Failures, min(2, len(s.FailedSeeds)))
	f := s.Failures[0]
	require.Equal(t, s.FailedSeeds[0], f.Seed, "the lowest failing seed is shrunk first")
	require.Equal(t, f.Seed, f.Options.Seed)
	require.Equal(t, scenario.MutantSkipFence, f.Options.Mutant)
	require.NotEmpty(t, f.Invariant)
	require.NotNil(t, f.Shrunk)
	require.LessOrEqual(t, f.Shrunk.Faults+f.Shrunk.Ops, f.Shrunk.FromFaults+f.Shrunk.FromOps)
	require.Contains(t, f.Replay, "loamrouter sim cutover --seed ")
	require.Contains(t, f.Shrunk.Replay, "--schedule '"+f.Shrunk.Schedule+"'")
	for _, want := range []string{"SEED     ", "OPTIONS", "SCHEDULE " + f.Shrunk.Schedule, "HISTORY"} {
		require.Contains(t, f.Report, want)
	}

	page, err := os.ReadFile(report)
	require.NoError(t, err)
	require.Contains(t, string(page), "<svg")
	require.Contains(t, string(page), "broke "+f.Invariant)
	require.Contains(t, string(page), "violated "+f.Invariant)
	require.Contains(t, string(page), f.Shrunk.Replay[:40])
	require.Equal(t, len(s.Failures), strings.Count(string(page), "<h2>"), "one drawing per shrunk failure")
	require.NotContains(t, string(page), "<script")

	// The text form prints the same failure for a person.
	text, _, err := runSplit(t, "sim", "cutover", "--mutant", scenario.MutantSkipFence, "--seed", itoaTest(int(f.Seed)))
	require.Error(t, err)
	require.Contains(t, text, "--- FAIL cutover seed ")
	require.Contains(t, text, f.Shrunk.Replay)
}

// TestSimReplayBySeedSameTraceHash: the replay commands a failure prints replay it exactly:
// the seed alone gives the failing run's trace hash, the shrunk schedule the shrunk run's;
// a passing seed replays to the same hash twice, and --trace writes exactly the lines the
// hash covers.
func TestSimReplayBySeedSameTraceHash(t *testing.T) {
	out, _, err := runSplit(t, "sim", "cutover", "--mutant", scenario.MutantSkipFence, "--seeds", "30", "--shrink", "1", "--output", "json")
	require.Error(t, err)
	f := simJSON(t, out).Scenarios[0].Failures[0]

	replay := func(command string) simRun {
		t.Helper()
		args := shellWords(t, strings.TrimPrefix(command, "loamrouter "))
		out, _, err := runSplit(t, append(args, "--output", "json")...)
		require.Error(t, err, "the replay fails as the original did")
		s := simJSON(t, out).Scenarios[0]
		require.Len(t, s.Results, 1)
		return s.Results[0]
	}
	r := replay(f.Replay)
	require.Equal(t, f.TraceHash, r.TraceHash, "replaying the seed gives the failing run's hash")
	require.Equal(t, f.Invariant, *r.Invariant)
	r = replay(f.Shrunk.Replay)
	require.Equal(t, f.Shrunk.TraceHash, r.TraceHash, "replaying the shrunk schedule gives the shrunk run's hash")
	require.Equal(t, f.Invariant, *r.Invariant)

	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	var hashes []string
	for range 2 {
		out, _, err := runSplit(t, "sim", "cutover", "--seed", "7", "--trace", trace, "--output", "json")
		require.NoError(t, err)
		s := simJSON(t, out).Scenarios[0]
		require.Nil(t, s.Results[0].Invariant)
		hashes = append(hashes, s.Results[0].TraceHash)
	}
	require.Equal(t, hashes[0], hashes[1])
	data, err := os.ReadFile(trace)
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	require.Equal(t, hashes[0], hex.EncodeToString(sum[:]), "the trace file is what the hash covers")
	out, _, err = runSplit(t, "sim", "cutover", "--seed", "8", "--output", "json")
	require.NoError(t, err)
	require.NotEqual(t, hashes[0], simJSON(t, out).Scenarios[0].Results[0].TraceHash, "another seed, another run")
}

// shellWords splits a printed command line, honouring single quotes.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	in, has := false, false
	for _, r := range s {
		switch {
		case r == '\'':
			in, has = !in, true
		case r == ' ' && !in:
			if has {
				words = append(words, cur.String())
			}
			cur.Reset()
			has = false
		default:
			cur.WriteRune(r)
			has = true
		}
	}
	require.False(t, in, "unbalanced quote in %q", s)
	if has {
		words = append(words, cur.String())
	}
	return words
}

// TestSimArgumentErrors: mistakes are named with what to do.
func TestSimArgumentErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", "cutovr"}, `no scenario "cutovr": choose from traffic, bank, push, push-kubernetes, cutover`},
		{[]string{"sim", "traffic", "--mutant", scenario.MutantSkipFence}, "scenario traffic has no mutant"},
		{[]string{"sim", "--mutant", "no-such"}, `no scenario has mutant "no-such"`},
		{[]string{"sim", "cutover", "--schedule", "ops=1;faults="}, "give exactly one --seed"},
		{[]string{"sim", "cutover", "--seed", "1", "--schedule", "ops=x"}, "--schedule: detsim: bad schedule"},
		{[]string{"sim", "cutover", "--seeds", "0"}, "--seeds 0: give a positive number"},
		{[]string{"sim", "--seed", "1", "--trace", "x.jsonl"}, "--trace writes one run: name one scenario"},
	} {
		_, _, err := runSplit(t, c.args...)
		require.ErrorContains(t, err, c.want, "%v", c.args)
		require.Equal(t, 1, exitCode(err))
	}
	out, _, err := runSplit(t, "sim", "--list", "--output", "json")
	require.NoError(t, err)
	var list []scenarioInfo
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	require.Equal(t, scenarioNames(scenario.All()), func() (names []string) {
		for _, s := range list {
			names = append(names, s.Name)
		}
		return names
	}())
}

// TestSimProgressLine: rate, share and ETA from the seeds done so far.
func TestSimProgressLine(t *testing.T) {
	require.Equal(t, "cutover: 500/2000 seeds (25%), 100 seeds/s, 2 failing, ETA 15s",
		progressLine("cutover", 500, 2000, 2, 5*time.Second))
	require.Equal(t, "push: 0/10 seeds (0%), 0 seeds/s, 0 failing, ?", progressLine("push", 0, 10, 0, time.Second))
	require.Equal(t, "push: 10/10 seeds (100%), 5 seeds/s, 0 failing, done in 2s", progressLine("push", 10, 10, 0, 2*time.Second))
	require.Equal(t, "push: 999/1000 seeds (99%), 999 seeds/s, 0 failing, ETA <1s", progressLine("push", 999, 1000, 0, time.Second))
}

// TestSimBinaryExitStatus: the binary exits 3 when a seed fails and 0 when none does.
func TestSimBinaryExitStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; not in -short")
	}
	bin := binary(t)
	cmd := exec.Command(bin, "sim", "cutover", "--mutant", scenario.MutantSkipFence, "--seeds", "20", "--shrink", "1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "%v\n%s", err, out)
	require.Equal(t, 3, ee.ExitCode(), "%s", out)
	require.Contains(t, string(out), "loamrouter: ")
	require.NoError(t, exec.Command(bin, "sim", "traffic", "--seeds", "5").Run())
}

// syncBuffer is a bytes.Buffer safe for the progress goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSimProgressRedraws: written to a file or pipe, the progress line is a new line every
// progressLogEvery while work runs, and the final state ends it.
func TestSimProgressRedraws(t *testing.T) {
	defer func(d time.Duration) { progressLogEvery = d }(progressLogEvery)
	progressLogEvery = 5 * time.Millisecond
	var buf syncBuffer
	var n atomic.Int64
	p := startProgress(&buf, func(final bool) string {
		if final {
			return "final " + strconv.FormatInt(n.Load(), 10)
		}
		return "at " + strconv.FormatInt(n.Add(1), 10)
	})
	require.Eventually(t, func() bool { return n.Load() >= 3 }, 5*time.Second, time.Millisecond)
	p.stop()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	require.GreaterOrEqual(t, len(lines), 4)
	require.Equal(t, "at 1", lines[0])
	require.Equal(t, "final "+strconv.FormatInt(n.Load(), 10), lines[len(lines)-1])
	require.NotContains(t, buf.String(), "\r", "no carriage returns outside a terminal")
}
