package render

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"loam.dev/router/kernel/shardmap"
)

// poolsFromFiles is what PgDog builds from the two files, as read from its source
// (pgdog/src/backend/databases.rs at b4601264, new_pool and from_config): a pool per
// [[users]] entry whose database has [[databases]] entries, one per such entry. It is the
// test's model of SHOW POOLS, written from the parsed files and not from the renderer's.
func poolsFromFiles(cfg pgdogTOML, users usersTOML) []PoolRow {
	var rows []PoolRow
	for _, u := range users.Users {
		for _, d := range cfg.Databases {
			if d.Name == u.Database {
				rows = append(rows, PoolRow{Database: d.Name, User: u.Name, Addr: d.Host, Port: uint16(d.Port), Shard: uint32(d.Shard), Role: d.Role})
			}
		}
	}
	return rows
}

// TestExpectedPoolsMatchFiles: the rows ExpectedPools promises are the rows PgDog builds
// from the files PgDog renders for the same inputs.
func TestExpectedPoolsMatchFiles(t *testing.T) {
	for _, rec := range []*shardmap.Record{hashRecord(3, true), listRecord(), reshardRecord()} {
		opts := PgDogOptions{TLS: tlsOpts(), Branches: []Branch{{Name: "dev", Backends: make([]shardmap.Backend, len(rec.Shards))}}}
		for i := range rec.Shards {
			opts.Branches[0].Backends[i] = shardmap.Backend{Host: fmt.Sprintf("10.8.0.%d", i), Port: 5432, Database: "dev"}
		}
		fs, err := PgDog(rec, creds(), opts)
		require.NoError(t, err)
		want, err := ExpectedPools(rec, creds(), opts)
		require.NoError(t, err)
		require.ElementsMatch(t, want, poolsFromFiles(parsePgDog(t, fs)))
	}
}

// TestGenerationFromRenderedPools: an instance that loaded both files of generation g
// shows g; one that loaded pgdog.toml and users.toml of different generations shows none
// (rather than the wrong one).
func TestGenerationFromRenderedPools(t *testing.T) {
	at := func(g uint64) (pgdogTOML, usersTOML) {
		r := hashRecord(2, true)
		r.Generation = g
		fs, err := PgDog(r, creds(), PgDogOptions{TLS: tlsOpts()})
		require.NoError(t, err)
		return parsePgDog(t, fs)
	}
	cfg7, users7 := at(7)
	cfg8, users8 := at(8)

	g, known, err := GenerationFromPools("app", poolsFromFiles(cfg7, users7))
	require.NoError(t, err)
	require.True(t, known)
	require.EqualValues(t, 7, g)
	g, known, err = GenerationFromPools("app", poolsFromFiles(cfg8, users8))
	require.NoError(t, err)
	require.True(t, known)
	require.EqualValues(t, 8, g)

	for _, mixed := range [][]PoolRow{poolsFromFiles(cfg7, users8), poolsFromFiles(cfg8, users7)} {
		require.NotEmpty(t, mixed, "the application pools exist either way")
		_, known, err = GenerationFromPools("app", mixed)
		require.NoError(t, err)
		require.False(t, known, "files of two generations must not report either")
	}
	_, known, err = GenerationFromPools("other", poolsFromFiles(cfg7, users7))
	require.NoError(t, err)
	require.False(t, known, "a marker belongs to its own database only")
}

// TestCutoverInMemoryIsVisibleOnlyThroughExpectedPools: PgDog's CUTOVER exchanges the names
// of <db> and the reshard destination (databases and users' database alike) in memory.
// The marker still reports the files' generation; the pools no longer match ExpectedPools.
func TestCutoverInMemoryIsVisibleOnlyThroughExpectedPools(t *testing.T) {
	rec := reshardRecord()
	fs, err := PgDog(rec, creds(), PgDogOptions{TLS: tlsOpts()})
	require.NoError(t, err)
	cfg, users := parsePgDog(t, fs)
	src, dst := "app", ReshardDatabase("app", rec.Generation)
	swap := func(s string) string {
		switch s {
		case src:
			return dst
		case dst:
			return src
		}
		return s
	}
	for i := range cfg.Databases {
		cfg.Databases[i].Name = swap(cfg.Databases[i].Name)
	}
	for i := range users.Users {
		users.Users[i].Database = swap(users.Users[i].Database)
	}
	rows := poolsFromFiles(cfg, users)
	g, known, err := GenerationFromPools("app", rows)
	require.NoError(t, err)
	require.True(t, known)
	require.Equal(t, rec.Generation, g)
	want, err := ExpectedPools(rec, creds(), PgDogOptions{TLS: tlsOpts()})
	require.NoError(t, err)
	require.NotSubset(t, rows, want, "after CUTOVER the <db> pools point at the destination's hosts")
	// Every client-facing user is still on app after the swap: the destination carried them.
	for _, u := range creds().Users {
		require.Contains(t, databasesOf(rows, u.Name), "app")
	}
}

func databasesOf(rows []PoolRow, user string) []string {
	var out []string
	for _, r := range rows {
		if r.User == user {
			out = append(out, r.Database)
		}
	}
	return out
}

func TestGenerationFromPools(t *testing.T) {
	m := func(db string, g uint64) PoolRow {
		return PoolRow{Database: GenerationDatabase(db, g), User: GenerationUser, Addr: "h", Port: 1}
	}
	g, known, err := GenerationFromPools("app", []PoolRow{{Database: "app", User: "app"}, m("app", 12), m("app", 12), m("other", 3)})
	require.NoError(t, err)
	require.True(t, known)
	require.EqualValues(t, 12, g)

	_, known, err = GenerationFromPools("app", []PoolRow{{Database: "app__generation_5", User: "app"}})
	require.NoError(t, err)
	require.False(t, known, "only the marker user counts")

	_, known, err = GenerationFromPools("app", []PoolRow{m("app", 9), m("app", 4)})
	require.False(t, known)
	var ge *GenerationError
	require.True(t, errors.As(err, &ge))
	require.Equal(t, []uint64{4, 9}, ge.Generations)
	require.Contains(t, err.Error(), `generation markers 4, 9 for database "app"`)
}

func TestParseGenerationDatabase(t *testing.T) {
	for _, c := range []struct {
		in string
		db string
		g  uint64
	}{
		{"app__generation_7", "app", 7},
		{"app___generation_7", "app_", 7},
		{"a__generation_18446744073709551615", "a", math.MaxUint64},
	} {
		db, g, ok := ParseGenerationDatabase(c.in)
		require.True(t, ok, c.in)
		require.Equal(t, c.db, db)
		require.Equal(t, c.g, g)
	}
	for _, in := range []string{
		"", "app", "__generation_7", "app__generation_", "app__generation_0", "app__generation_07",
		"app__generation_+7", "app__generation_7x", "app__generation_18446744073709551616",
		"a__b__generation_7", "app__generation_ 7",
	} {
		_, _, ok := ParseGenerationDatabase(in)
		require.False(t, ok, in)
	}
}

// TestGenerationDatabaseRoundTrip: every database name and generation the renderer can
// produce parses back to itself.
func TestGenerationDatabaseRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		db := rapid.StringMatching(`[a-z_][a-z0-9_]{0,20}`).Filter(func(s string) bool { return !containsDouble(s) }).Draw(t, "db")
		g := rapid.Uint64Min(1).Draw(t, "g")
		d, got, ok := ParseGenerationDatabase(GenerationDatabase(db, g))
		if !ok || d != db || got != g {
			t.Fatalf("%q at %d parsed as %q %d %v", db, g, d, got, ok)
		}
	})
}

func containsDouble(s string) bool {
	for i := 1; i < len(s); i++ {
		if s[i] == '_' && s[i-1] == '_' {
			return true
		}
	}
	return false
}

func TestAnnotations(t *testing.T) {
	a := Annotations(hashRecord(2, false))
	require.Equal(t, map[string]string{"loam.dev/router-generation": "7"}, a)
	g, err := GenerationFromAnnotations(a)
	require.NoError(t, err)
	require.EqualValues(t, 7, g)

	_, err = GenerationFromAnnotations(map[string]string{"other": "1"})
	require.ErrorIs(t, err, ErrNoGeneration)
	for _, bad := range []string{"", "0", "07", "+7", "-7", "7 ", "0x7", "1_000", "18446744073709551616"} {
		_, err = GenerationFromAnnotations(map[string]string{AnnotationGeneration: bad})
		require.Error(t, err, bad)
		require.NotErrorIs(t, err, ErrNoGeneration)
		require.Contains(t, err.Error(), fmt.Sprintf("%q", bad))
	}
}
