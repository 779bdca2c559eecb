package oracle

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// EnvBinary names the oracle binary, overriding the search for proof/_build.
const EnvBinary = "LOAM_PROOF_ORACLE"

// EnvRequireReal, set to 1, turns "skipped: needs the proof oracle" into a failure (CI).
const EnvRequireReal = "LOAM_REQUIRE_REAL"

// ErrNotBuilt means no oracle binary was found: run `make proof`.
var ErrNotBuilt = errors.New("oracle: no proof oracle binary (run make proof)")

// Path returns the oracle binary: $LOAM_PROOF_ORACLE, else proof/_build/loam-router-oracle
// of the module that contains the working directory.
func Path() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		return p, executable(p)
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("oracle: finding the module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "proof", "_build", "loam-router-oracle")
			return p, executable(p)
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("%w: no go.mod above the working directory", ErrNotBuilt)
		}
		dir = up
	}
}

func executable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotBuilt, err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("%w: %s is not an executable file", ErrNotBuilt, p)
	}
	return nil
}

// Oracle is one running oracle process answering request lines in order.
type Oracle struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// Start runs the oracle at path with args (e.g. "--mutant=tie"). It ends with ctx or Close.
func Start(ctx context.Context, path string, args ...string) (*Oracle, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("oracle: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("oracle: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("oracle: starting %s: %w", path, err)
	}
	return &Oracle{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}, nil
}

// Ask sends one request line (no newline inside, not blank) and returns the response line
// without its newline.
func (o *Oracle) Ask(line []byte) ([]byte, error) {
	line = bytes.TrimRight(line, "\n")
	if len(bytes.TrimSpace(line)) == 0 || bytes.IndexByte(line, '\n') >= 0 {
		return nil, fmt.Errorf("oracle: a request is one non-blank line, not %q", line)
	}
	if _, err := o.in.Write(append(line, '\n')); err != nil {
		return nil, fmt.Errorf("oracle: sending a request: %w", err)
	}
	resp, err := o.out.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("oracle: reading its answer: %w", err)
	}
	return bytes.TrimRight(resp, "\n"), nil
}

// Close ends the oracle and waits for it.
func (o *Oracle) Close() error {
	o.in.Close()
	if err := o.cmd.Wait(); err != nil {
		return fmt.Errorf("oracle: %w", err)
	}
	return nil
}

// Require starts the oracle for a test and stops it when the test ends. Without a built
// oracle the test is skipped with "skipped: needs the proof oracle (make proof)", or fails
// under LOAM_REQUIRE_REAL=1.
func Require(t testing.TB, args ...string) *Oracle {
	t.Helper()
	o := Optional(t, args...)
	if o == nil {
		t.Skip("skipped: needs the proof oracle (make proof)")
	}
	return o
}

// Optional is Require for a test that has other opinions to compare: without a built oracle
// it logs "needs the proof oracle (make proof)" and returns nil (a failure under
// LOAM_REQUIRE_REAL=1).
func Optional(t testing.TB, args ...string) *Oracle {
	t.Helper()
	p, err := Path()
	if err != nil {
		msg := fmt.Sprintf("needs the proof oracle (make proof): %v", err)
		if os.Getenv(EnvRequireReal) == "1" {
			t.Fatalf("%s; failing because %s=1", msg, EnvRequireReal)
		}
		t.Log(msg + "; going on without it")
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	o, err := Start(ctx, p, args...)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		o.in.Close()
		_ = o.cmd.Wait()
		cancel()
	})
	return o
}

// Agree reports whether two responses to one request agree as the protocol defines it: equal
// "ok"; for answers, equal bytes (both are canonical); for errors, equal "kind" ("field" and
// "error" are for people). A line that is not a response never agrees.
func Agree(a, b []byte) bool {
	ka, oka := verdict(a)
	kb, okb := verdict(b)
	if ka == "" || kb == "" || oka != okb {
		return false
	}
	if oka {
		return bytes.Equal(bytes.TrimSpace(a), bytes.TrimSpace(b))
	}
	return ka == kb
}

// verdict reads "ok" and "kind" of a response; kind is "ok" for an answer, "" when the line
// is not a response.
func verdict(line []byte) (kind string, ok bool) {
	var r struct {
		OK   *bool  `json:"ok"`
		Kind string `json:"kind"`
	}
	if json.Unmarshal(line, &r) != nil || r.OK == nil {
		return "", false
	}
	if *r.OK {
		return "ok", true
	}
	if r.Kind == "" {
		return "", false
	}
	return r.Kind, false
}
