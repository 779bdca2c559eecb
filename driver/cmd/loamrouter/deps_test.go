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
// the throwaway Postgres and Vitess launchers, are product packages (refrouter, pglaunch,
// vitesslaunch); the binary links no conformance helper, no package named as a test helper,
// and not the testing package.
func TestBinaryLinksNoTestHelpers(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "loam.dev/router/refrouter", "the demo's routers")
	require.Contains(t, deps, "loam.dev/router/pglaunch", "the demo's Postgres servers")
	require.Contains(t, deps, "loam.dev/router/vitesslaunch", "demo --vitess's Vitess")
	require.NotContains(t, deps, "testing", "a dependency of loamrouter imports testing")
	for _, d := range deps {
		require.False(t, strings.HasPrefix(d, "loam.dev/router/conformance"), "loamrouter links the test helper %s", d)
		require.False(t, strings.HasPrefix(d, "loam.dev/") && strings.HasSuffix(d, "test"), "loamrouter links %s, a test helper by its name", d)
	}
}
