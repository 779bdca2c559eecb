package mutategit

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// script is the wrapper's absolute path; its directory goes first on PATH, as in make mutate.
func script(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("git")
	require.NoError(t, err)
	return p
}

// fakeGit is a directory holding a git that writes its arguments, each ended by a NUL, to
// the file args beside it, prints "fake" and exits with $FAKE_GIT_EXIT (0 when unset).
func fakeGit(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	body := "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\0' \"$a\"; done > " + filepath.Join(dir, "args") +
		"\necho fake\nexit ${FAKE_GIT_EXIT:-0}\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "git"), []byte(body), 0o755))
	return dir
}

// environ is this process's environment with PATH set to path and MUTATE_REL to rel (unset
// when rel is nil), and nothing that points git at another repository.
func environ(path string, rel *string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "PATH", "MUTATE_REL", "FAKE_GIT_EXIT", "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE":
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "PATH="+path)
	if rel != nil {
		env = append(env, "MUTATE_REL="+*rel)
	}
	return append(env, extra...)
}

type result struct {
	code           int
	stdout, stderr string
}

// run runs the wrapper with env in dir ("" for this one), as gremlins runs the git it finds
// first on PATH; a wrapper that calls itself again is stopped after 10 s.
func run(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, script(t), args...)
	cmd.Dir, cmd.Env = dir, env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "the wrapper did not end (does it run itself?)")
	r := result{stdout: out.String(), stderr: errOut.String()}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		r.code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return r
}

// argsOf reads what the fake git in dir was called with.
func argsOf(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "args"))
	require.NoError(t, err, "the fake git was not run")
	args := strings.Split(string(b), "\x00")
	return args[:len(args)-1]
}

func str(s string) *string { return &s }

// TestRewritesGremlinsDiff: gremlins' one call (exactly diff --merge-base <rev>) gets -U0 and, when MUTATE_REL is set and not
// empty, --relative=$MUTATE_REL, the rest as gremlins gave it.
func TestRewritesGremlinsDiff(t *testing.T) {
	for _, c := range []struct {
		rel  *string
		want []string
	}{
		{str("machine/cutover/"), []string{"diff", "-U0", "--relative=machine/cutover/", "--merge-base", "5e7b223"}},
		{str("a dir/with * and $x/"), []string{"diff", "-U0", "--relative=a dir/with * and $x/", "--merge-base", "5e7b223"}},
		{str(""), []string{"diff", "-U0", "--merge-base", "5e7b223"}},
		{nil, []string{"diff", "-U0", "--merge-base", "5e7b223"}},
	} {
		fake := fakeGit(t)
		r := run(t, "", environ(filepath.Dir(script(t))+":"+fake+":"+os.Getenv("PATH"), c.rel),
			"diff", "--merge-base", "5e7b223")
		require.Zero(t, r.code, r.stderr)
		require.Equal(t, c.want, argsOf(t, fake))
		require.Equal(t, "fake\n", r.stdout)
	}
}

// TestPassesOtherCallsThrough: every other call reaches git exactly as given, MUTATE_REL set
// or not, and git's output and exit status are the wrapper's.
func TestPassesOtherCallsThrough(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"status"},
		{"diff"},
		{"diff", "HEAD"},
		{"diff", "--merge-base"},
		{"diff", "--merge-base", "main", "--", "machine"},
		{"diff", "--stat", "--merge-base", "main"},
		{"--merge-base", "diff", "main"},
		{"-C", "machine", "diff", "--merge-base", "main"},
		{"log", "--format=%H %s", "-n", "1"},
		{"commit", "-m", "two words\nand a second line"},
		{"diff", "", "--merge-base", "*"},
		{"rev-parse", "--show-toplevel"},
	} {
		for _, rel := range []*string{nil, str("machine/vreshard/")} {
			fake := fakeGit(t)
			r := run(t, "", environ(filepath.Dir(script(t))+":"+fake+":"+os.Getenv("PATH"), rel, "FAKE_GIT_EXIT=3"), args...)
			require.Equal(t, 3, r.code, "%q: %s", args, r.stderr)
			require.Equal(t, "fake\n", r.stdout)
			require.Equal(t, append([]string{}, args...), argsOf(t, fake))
		}
	}
}

// TestFindsTheRealGit: the wrapper skips its own directory on PATH however it is spelt (here
// also through a symbolic link) and runs the next git; with no other git it says so.
func TestFindsTheRealGit(t *testing.T) {
	own := filepath.Dir(script(t))
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(own, link))
	fake := fakeGit(t)
	r := run(t, "", environ(link+"::"+own+"/.:"+own+":"+fake, nil), "version")
	require.Zero(t, r.code, r.stderr)
	require.Equal(t, []string{"version"}, argsOf(t, fake))

	r = run(t, "", environ(own+":"+link, nil), "version")
	require.Equal(t, 127, r.code)
	require.Contains(t, r.stderr, "no git on PATH but make mutate's wrapper")
}

// TestWithGit: the rewritten call is one the real git takes, and its diff is what gremlins
// needs: names relative to the package's directory, a hunk per run of added lines (two
// changes 3 lines apart make one hunk under the default 3 lines of context).
func TestWithGit(t *testing.T) {
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Skip("skipped: needs git")
	}
	repo := t.TempDir()
	env := environ(filepath.Dir(script(t))+":"+os.Getenv("PATH"), str("pkg/sub/"),
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	git := func(args ...string) string {
		cmd := exec.Command(gitPath, args...)
		cmd.Dir, cmd.Env = repo, env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %q: %s", args, out)
		return string(out)
	}
	file := filepath.Join(repo, "pkg", "sub", "f.go")
	require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
	lines := []string{"package sub", "", "const a = 1", "", "", "", "const b = 2", ""}
	require.NoError(t, os.WriteFile(file, []byte(strings.Join(lines, "\n")), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "top.go"), []byte("package top\n"), 0o644))
	git("init", "-q")
	git("add", ".")
	git("commit", "-q", "-m", "base")
	base := strings.TrimSpace(git("rev-parse", "HEAD"))
	lines[2], lines[6] = "const a = 10", "const b = 20"
	require.NoError(t, os.WriteFile(file, []byte(strings.Join(lines, "\n")), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "top.go"), []byte("package top // changed\n"), 0o644))
	require.Equal(t, 1, strings.Count(git("diff", "--merge-base", base, "--", "pkg"), "\n@@ "), "git merges the two changes into one hunk")

	r := run(t, repo, env, "diff", "--merge-base", base)
	require.Zero(t, r.code, r.stderr)
	require.Contains(t, r.stdout, "--- a/f.go\n+++ b/f.go\n")
	require.Regexp(t, `\n@@ -3 \+3 @@.*\n-const a = 1\n\+const a = 10\n@@ -7 \+7 @@.*\n-const b = 2\n\+const b = 20\n$`, r.stdout)
	require.NotContains(t, r.stdout, "top.go")
}
