package mysql_test

import (
	"os"
	"testing"

	"loam.dev/router/conformance/mysqltest"
)

// my is the package's shared server: tests take their own databases and users on it.
var my = mysqltest.NewShared()

// TestMain stops the shared server and removes the mysqltest template once the package's
// tests are done.
func TestMain(m *testing.M) {
	code := m.Run()
	my.Close()
	mysqltest.RemoveTemplate()
	os.Exit(code)
}
