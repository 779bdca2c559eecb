package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBinaryLinksNoTestHelpers: what loamrouter runs for its demo, the reference router and
// the throwaway-Postgres launcher, are product packages (refrouter, pglaunch); the binary
// links no conformance helper and no package named as a test helper — except
// conformance/vitesstest, which `demo --vitess` still starts Vitess with: that launcher is
// not split from its testing.TB wrappers yet (as pglaunch is from pgtest), and this test
// names it so the exception cannot grow.
func TestBinaryLinksNoTestHelpers(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "loam.dev/router/refrouter", "the demo's routers")
	require.Contains(t, deps, "loam.dev/router/pglaunch", "the demo's Postgres servers")
	for _, d := range deps {
		if d == "loam.dev/router/conformance/vitesstest" {
			continue // demo --vitess (see above)
		}
		require.False(t, strings.HasPrefix(d, "loam.dev/router/conformance"), "loamrouter links the test helper %s", d)
		require.False(t, strings.HasPrefix(d, "loam.dev/") && strings.HasSuffix(d, "test"), "loamrouter links %s, a test helper by its name", d)
	}
}
