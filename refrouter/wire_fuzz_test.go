package refrouter_test

import (
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
