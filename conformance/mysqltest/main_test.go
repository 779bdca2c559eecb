package mysqltest

import (
	"os"
	"testing"
)

// TestMain removes this process's template data directory when the tests are done, as every
// package that starts servers may.
func TestMain(m *testing.M) {
	code := m.Run()
	RemoveTemplate()
	os.Exit(code)
}
