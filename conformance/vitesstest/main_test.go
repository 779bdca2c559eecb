package vitesstest

import (
	"os"
	"testing"
)

// vt is the cluster the tests of this package share.
var vt Shared

func TestMain(m *testing.M) {
	code := m.Run()
	vt.Close()
	os.Exit(code)
}
