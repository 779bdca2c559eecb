package redistest

import (
	"errors"
	"strings"
	"testing"
)

type fakeTB struct{ skipped, failed string }

func (f *fakeTB) Helper()           {}
func (f *fakeTB) Skip(args ...any)  { f.skipped = args[0].(string) }
func (f *fakeTB) Fatal(args ...any) { f.failed = args[0].(string) }

// TestRequireSkipsOrFails: a missing binary skips with the agreed message, and fails instead
// under LOAM_REQUIRE_REAL=1.
func TestRequireSkipsOrFails(t *testing.T) {
	missing := errors.New(`exec: "redis-server": executable file not found in $PATH`)
	t.Setenv("LOAM_REQUIRE_REAL", "")
	f := &fakeTB{}
	require(f, "", missing)
	if !strings.HasPrefix(f.skipped, "skipped: needs redis-server") || f.failed != "" {
		t.Fatalf("want a skip starting with the agreed words, got skip=%q fail=%q", f.skipped, f.failed)
	}
	t.Setenv("LOAM_REQUIRE_REAL", "1")
	f = &fakeTB{}
	require(f, "", missing)
	if f.failed == "" || f.skipped != "" || !strings.Contains(f.failed, "skipped: needs redis-server") {
		t.Fatalf("want a failure under LOAM_REQUIRE_REAL=1, got skip=%q fail=%q", f.skipped, f.failed)
	}
	f = &fakeTB{}
	if got := require(f, "/usr/bin/redis-server", nil); got != "/usr/bin/redis-server" || f.failed != "" || f.skipped != "" {
		t.Fatalf("a present binary must pass through, got %q %+v", got, f)
	}
}
