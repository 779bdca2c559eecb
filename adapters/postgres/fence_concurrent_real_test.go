package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters/postgres"
)

// TestRealFenceConcurrentSameRole: a cutover fences the shards of a layout at once, and
// shards on one server share the role, so their FenceWrites (and later UnfenceWrites) all
// ALTER the same catalog row at the same moment. Each call must succeed on its own, not
// fail with "tuple concurrently updated" and leave its caller to retry after a delay while
// every write waits. Six databases, ten rounds of fencing them all at once and unfencing
// them all at once.
func TestRealFenceConcurrentSameRole(t *testing.T) {
	s := pg.Get(t)
	db, r := newEnvDB(t, s)
	dbs := []string{db}
	for i := range 5 {
		name := fmt.Sprintf("%s_c%d", db, i)
		adminExec(t, s, "postgres", "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
		dbs = append(dbs, name)
	}
	var backends []*postgres.Backend
	for _, d := range dbs {
		b, err := postgres.Open(t.Context(), s.DSN(d), postgres.Options{})
		require.NoError(t, err)
		t.Cleanup(b.Close)
		backends = append(backends, b)
	}
	all := func(f func(b *postgres.Backend) error) []error {
		errs := make([]error, len(backends))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, b := range backends {
			wg.Go(func() {
				<-start
				errs[i] = f(b)
			})
		}
		close(start)
		wg.Wait()
		return errs
	}
	canLogin := func() bool {
		conn := s.Connect(t, "postgres")
		defer conn.Close(context.Background())
		var ok bool
		require.NoError(t, conn.QueryRow(t.Context(), "SELECT rolcanlogin FROM pg_roles WHERE rolname = $1", r.app).Scan(&ok))
		return ok
	}
	for round := range 10 {
		for i, err := range all(func(b *postgres.Backend) error { return b.FenceWrites(t.Context(), r.app) }) {
			require.NoError(t, err, "round %d: FenceWrites on %s", round, dbs[i])
		}
		require.False(t, canLogin(), "round %d: fenced", round)
		for i, err := range all(func(b *postgres.Backend) error { return b.UnfenceWrites(t.Context(), r.app) }) {
			require.NoError(t, err, "round %d: UnfenceWrites on %s", round, dbs[i])
		}
		require.True(t, canLogin(), "round %d: the login is back", round)
	}
}
