package postgres_test

import (
	"os"
	"testing"

	"loam.dev/router/conformance/pgtest"
)

// TestMain removes the pgtest template data directory once the package's tests are done.
func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.RemoveTemplate()
	os.Exit(code)
}
