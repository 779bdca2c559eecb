package vtctld_test

import (
	"os"
	"testing"

	"loam.dev/router/conformance/vitesstest"
)

// vt is the real Vitess (etcd, vtctld, tablets on MariaDB) the tests of this package share;
// each test uses keyspaces of its own.
var vt vitesstest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	vt.Close()
	os.Exit(code)
}
