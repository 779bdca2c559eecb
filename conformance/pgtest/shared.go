package pgtest

import (
	"context"
	"sync"
	"testing"

	"loam.dev/router/pglaunch"
)

// Shared is one server for all the tests of a package, started by the first test that asks
// for it and stopped by Close, which TestMain calls after m.Run:
//
//	var pg = pgtest.NewShared(pgtest.WithSetting("max_prepared_transactions", "10"))
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		pg.Close()
//		pgtest.RemoveTemplate()
//		os.Exit(code)
//	}
//
//	func TestRealSomething(t *testing.T) {
//		srv := pg.Get(t)
//		srv.CreateDatabase(t, "something") // each test its own database
//		...
//	}
//
// Each test that calls Get skips (or fails, under LOAM_REQUIRE_REAL=1) on its own when the
// machine has no Postgres, so a package of mixed tests still runs the others.
type Shared struct {
	opts []Option
	once sync.Once
	srv  *Server
	err  error
}

// NewShared describes the shared server; nothing starts until the first Get.
func NewShared(opts ...Option) *Shared { return &Shared{opts: opts} }

// Get returns the shared server, starting it on first use.
func (sh *Shared) Get(t testing.TB) *Server {
	t.Helper()
	sh.once.Do(func() {
		var s *pglaunch.Server
		if s, sh.err = pglaunch.Start(context.Background(), sh.opts...); sh.err == nil {
			sh.srv = &Server{Server: s}
		}
	})
	if sh.err != nil {
		fail(t, sh.err)
	}
	return sh.srv
}

// Close stops and removes the shared server if it was started.
func (sh *Shared) Close() error {
	if sh.srv == nil {
		return nil
	}
	return sh.srv.Close()
}
