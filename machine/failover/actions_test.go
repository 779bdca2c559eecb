package failover_test

import (
	"os"
	"testing"

	"loam.dev/router/machine/failover"
	"loam.dev/router/machine/machinetest"
)

// TestActionsCovered: the package doc lists exactly the Act constants, and the
// interaction scripts show every one of them being emitted, and no other.
func TestActionsCovered(t *testing.T) {
	machinetest.ActionsCovered(t, os.DirFS("."), "failover.go", failover.Spec)
}
