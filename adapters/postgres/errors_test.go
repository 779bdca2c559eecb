package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/postgres"
)

func TestIsFenceError(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		fenced bool
	}{
		{"nologin", &pgconn.PgError{Code: "28000", Message: `role "app" is not permitted to log in`, Routine: "InitializeSessionUserId"}, true},
		{"nologin translated", &pgconn.PgError{Code: "28000", Message: `la función «app» no tiene permitido conectarse`, Routine: "InitializeSessionUserId"}, true},
		{"terminated", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}, true},
		{"wrapped by pgx connect", fmt.Errorf("failed to connect: %w", &pgconn.PgError{Code: "57P01"}), true},
		{"no such role", &pgconn.PgError{Code: "28000", Message: `role "ghost" does not exist`, Routine: "InitializeSessionUserId"}, false},
		{"pg_hba", &pgconn.PgError{Code: "28000", Message: `no pg_hba.conf entry for host "10.0.0.1"`, Routine: "ClientAuthentication"}, false},
		{"password", &pgconn.PgError{Code: "28P01", Message: `password authentication failed for user "app"`}, false},
		{"read-only", &pgconn.PgError{Code: "25006", Message: "cannot execute INSERT in a read-only transaction"}, false},
		{"plain", errors.New("connection reset by peer"), false},
		{"nil", nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.fenced, postgres.IsFenceError(c.err))
			err := postgres.Classify("db1:5432", "Insert", c.err)
			if c.err == nil {
				require.NoError(t, err)
				return
			}
			require.Equal(t, c.fenced, errors.Is(err, adapters.ErrFenced))
			var be *adapters.BackendError
			require.ErrorAs(t, err, &be)
			require.Equal(t, "db1:5432", be.Backend)
			require.Equal(t, "Insert", be.Op)
			require.Equal(t, postgres.Code(c.err), be.Code)
			require.ErrorIs(t, err, c.err, "the original error stays in the chain")
			require.Same(t, err, postgres.Classify("other:1", "Again", err), "classifying twice keeps the first")
		})
	}
	err := postgres.Classify("db1:5432", "Status", fmt.Errorf("query: %w", context.Canceled))
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, errors.Is(err, adapters.ErrFenced))
}

func TestFenceMarker(t *testing.T) {
	for _, names := range [][]string{{"app"}, {"a", "b"}, {`we"ird`, "naïve", "x,y", `back\slash`}} {
		got, err := postgres.ParseFenceMarker(postgres.FormatFenceMarker(names))
		require.NoError(t, err)
		require.Equal(t, names, got)
	}
	for _, bad := range []string{"", "app", "null", `"app"`, `[""]`, `[1]`, `{"a":1}`, `["a"`} {
		_, err := postgres.ParseFenceMarker(bad)
		require.Error(t, err, "%q", bad)
		require.ErrorContains(t, err, postgres.FenceMarker)
	}
}

// FuzzParseFenceMarker: a marker that parses names roles, and writes back to a value that
// parses to the same roles.
func FuzzParseFenceMarker(f *testing.F) {
	for _, s := range []string{`["app"]`, `["a","b"]`, `[]`, `null`, `["\u0000"]`, `[""]`, "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		names, err := postgres.ParseFenceMarker(v)
		if err != nil {
			return
		}
		for _, n := range names {
			require.NotEmpty(t, n)
		}
		again, err := postgres.ParseFenceMarker(postgres.FormatFenceMarker(names))
		require.NoError(t, err)
		require.Equal(t, names, again)
	})
}

// A router's session fails after a cutover fenced its shard: Classify says so in the
// control plane's terms, keeping the SQLSTATE.
func ExampleClassify() {
	serverErr := &pgconn.PgError{Severity: "FATAL", Code: "57P01", Message: "terminating connection due to administrator command"}
	err := postgres.Classify("10.0.0.7:5432", "Insert", fmt.Errorf("exec: %w", serverErr))
	var be *adapters.BackendError
	if errors.As(err, &be) {
		fmt.Println(errors.Is(err, adapters.ErrFenced), be.Code)
	}
	fmt.Println(err)
	// Output:
	// true 57P01
	// 10.0.0.7:5432 Insert [57P01]: exec: FATAL: terminating connection due to administrator command (SQLSTATE 57P01)
}
