package vitesstest

import (
	"sync"
	"testing"

	"loam.dev/router/vitesslaunch"
)

// Shared is one cluster for all the tests of a package, started by the first test that asks
// for it and stopped by Close, which TestMain calls after m.Run:
//
//	var vt vitesstest.Shared
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		vt.Close()
//		os.Exit(code)
//	}
//
//	func TestRealSomething(t *testing.T) {
//		c := vt.Get(t)
//		c.CreateKeyspace(t, "something") // each test its own keyspace
//		...
//	}
//
// Each test that calls Get skips (or fails, under LOAM_REQUIRE_REAL=1) on its own when the
// machine has no Vitess, so a package of mixed tests still runs the others.
type Shared struct {
	once sync.Once
	c    *Cluster
	err  error
}

// Get returns the shared cluster, starting it on first use.
func (sh *Shared) Get(t testing.TB) *Cluster {
	t.Helper()
	sh.once.Do(func() {
		var c *vitesslaunch.Cluster
		if c, sh.err = vitesslaunch.Open(); sh.err == nil {
			sh.c = &Cluster{c}
		}
	})
	if sh.err != nil {
		fail(t, sh.err)
	}
	return sh.c
}

// Close stops and removes the shared cluster if it was started.
func (sh *Shared) Close() error {
	if sh.c == nil {
		return nil
	}
	return sh.c.Close()
}
