package refrouter_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/refrouter"
)

// FuzzParseAdmin: the admin parser never panics; what it accepts is lowercase, made of
// single-space-separated words, and parses again to the same command (PgDog's own rules:
// semicolons stripped, lowercased, split on single spaces).
func FuzzParseAdmin(f *testing.F) {
	for _, s := range []string{"RELOAD", "PAUSE app", "resume", "SHOW POOLS;", "COPY_DATA app app__reshard_2 loam_app slot_1", "CUTOVER 3", "STOP_TASK 7",
		"show  pools", "PAUSE a b", "cutover x", "", ";", "SHOW TASKS"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		c, err := refrouter.ParseAdmin(raw)
		if err != nil {
			require.ErrorIs(t, err, refrouter.ErrAdminSyntax)
			return
		}
		text := strings.Join(append([]string{c.Verb}, c.Args...), " ")
		require.Equal(t, strings.ToLower(text), text)
		for _, w := range append([]string{c.Verb}, c.Args...) {
			require.NotEmpty(t, w)
			require.NotContains(t, w, " ")
		}
		again, err := refrouter.ParseAdmin(text)
		require.NoError(t, err)
		require.Equal(t, c, again)
	})
}

// FuzzParseShardingKey: the comment parser never panics, a key it returns is non-empty,
// and every key WithShardingKey writes is read back exactly, whatever SQL follows.
func FuzzParseShardingKey(f *testing.F) {
	for _, s := range []string{"/* pgdog_sharding_key: 12 */ INSERT", "/*pgdog_sharding_key:'a''b'*/", "/* pgdog_sharding_key: */", "SELECT 1", "/* pgdog_sharding_key: 'x"} {
		f.Add(s, "a b", "SELECT 1")
	}
	f.Fuzz(func(t *testing.T, sql, key, rest string) {
		if k, err := refrouter.ParseShardingKey(sql); err != nil {
			require.ErrorIs(t, err, refrouter.ErrNoShardingKey)
		} else {
			require.NotEmpty(t, k)
		}
		if key == "" {
			return
		}
		q, err := refrouter.WithShardingKey(key, rest)
		require.NoError(t, err)
		got, err := refrouter.ParseShardingKey(q)
		require.NoError(t, err, q)
		require.Equal(t, key, got)
	})
}

// TestParseAdminHolds: the holds the PgDog adapter's Pause and Resume send parse as PgDog
// takes them (MAINTENANCE ON|OFF [db], PAUSE and RESUME [[user] db]); malformed ones are
// refused.
func TestParseAdminHolds(t *testing.T) {
	for raw, want := range map[string][]string{
		"MAINTENANCE ON app;": {"maintenance", "on", "app"},
		"MAINTENANCE OFF":     {"maintenance", "off"},
		"PAUSE app_user app":  {"pause", "app_user", "app"},
		"RESUME app":          {"resume", "app"},
	} {
		c, err := refrouter.ParseAdmin(raw)
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		if got := append([]string{c.Verb}, c.Args...); !slices.Equal(got, want) {
			t.Fatalf("%q parsed as %q, want %q", raw, got, want)
		}
	}
	for _, raw := range []string{"MAINTENANCE", "MAINTENANCE app", "MAINTENANCE ON a b", "PAUSE a b c", "RESUME a b c"} {
		if _, err := refrouter.ParseAdmin(raw); !errors.Is(err, refrouter.ErrAdminSyntax) {
			t.Fatalf("%q: %v, want ErrAdminSyntax", raw, err)
		}
	}
}
