package postgres_test

import (
	"os"
	"testing"

	"loam.dev/router/conformance/pgtest"
)

// pg is the package's shared server: tests take their own databases and roles on it.
var pg = pgtest.NewShared(serverSettings...)

// TestMain stops the shared server and removes the pgtest template once the package's tests
// are done.
func TestMain(m *testing.M) {
	code := m.Run()
	pg.Close()
	pgtest.RemoveTemplate()
	os.Exit(code)
}
