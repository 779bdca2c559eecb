package refrouter_test

import (
	"os"
	"sync"
	"testing"

	"loam.dev/router/conformance/pgtest"
)

// pg serves the tests of the reference router itself; cutSrc and cutDst the cutover's source
// and destination shards (logical replication on, room for the slots and workers).
var (
	pg             = pgtest.NewShared()
	cutSrc, cutDst = pgtest.NewShared(pgtest.WithSettings(cutoverServerSettings)), pgtest.NewShared(pgtest.WithSettings(cutoverServerSettings))
	appRoleOnce    sync.Once
)

func TestMain(m *testing.M) {
	code := m.Run()
	for _, sh := range []*pgtest.Shared{pg, cutSrc, cutDst} {
		sh.Close()
	}
	pgtest.RemoveTemplate()
	os.Exit(code)
}

// startServer returns the package's server, with the role the routers log in as.
func startServer(t *testing.T) *pgtest.Server {
	srv := pg.Get(t)
	appRoleOnce.Do(func() { srv.Exec(t, "postgres", "CREATE ROLE "+appRole+" LOGIN PASSWORD 'app-secret'") })
	return srv
}
