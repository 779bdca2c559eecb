package refrouter_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"loam.dev/router/kernel/pghash"
	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/refrouter"
)

func backends(n int) []shardmap.Backend {
	var out []shardmap.Backend
	for i := range n {
		out = append(out, shardmap.Backend{Host: fmt.Sprintf("10.0.0.%d", i+1), Port: uint16(5432 + i), Database: fmt.Sprintf("app_%d", i)})
	}
	return out
}

func renderPgDog(t testing.TB, rec *shardmap.Record) render.Files {
	t.Helper()
	c := creds
	c.SchemaAdmin = render.User{Name: "migrator", Password: "m"}
	fs, err := render.PgDog(rec, c, render.PgDogOptions{TLS: render.TLS{Insecure: true}})
	require.NoError(t, err)
	return fs
}

func u32(v uint32) *uint32                 { return &v }
func val(v shardmap.Value) *shardmap.Value { return &v }

// TestTopologyFromRenderedFiles: what the router loads from kernel/render's files is the
// record: the shards in order, the key, the generation, and the reshard destination.
func TestTopologyFromRenderedFiles(t *testing.T) {
	rec := shardmap.NewPgHash("app", shardmap.Key{Column: "id", Type: shardmap.Bigint, Tables: []string{"t", "u"}}, backends(3)...)
	rec.Generation = 7
	target := shardmap.Layout{Scheme: shardmap.PgHash{Key: rec.Scheme.ShardKey(), Shards: 4}}
	for i, b := range backends(4) {
		b.Host = "10.1.0." + fmt.Sprint(i+1)
		target.Shards = append(target.Shards, shardmap.Shard{Name: fmt.Sprintf("n%d", i), Backend: b, Fence: shardmap.FenceOpen})
	}
	rec.Target = &target
	rec.State = shardmap.State{Phase: shardmap.Resharding, To: 8}
	top, err := refrouter.ParseFiles(renderPgDog(t, rec))
	require.NoError(t, err)
	g, known := top.Generation("app")
	require.True(t, known)
	require.Equal(t, uint64(7), g)
	db := top.Databases["app"]
	require.NotNil(t, db)
	require.Len(t, db.Shards, 3)
	for i, b := range backends(3) {
		require.Equal(t, refrouter.Backend{Host: b.Host, Port: b.Port, Database: b.Database}, *db.Shards[i])
	}
	require.Equal(t, shardmap.PgHash{Key: shardmap.Key{Column: "id", Type: shardmap.Bigint}, Shards: 3}, db.Scheme)
	require.Equal(t, "app-secret", db.Users[appRole])
	dst := top.Databases[render.ReshardDatabase("app", 7)]
	require.NotNil(t, dst, "the reshard destination is loaded as its own database")
	require.Len(t, dst.Shards, 4)
	require.Equal(t, "10.1.0.4", dst.Shards[3].Host)
	_, known = top.Generation(render.ReshardDatabase("app", 7))
	require.False(t, known, "only the client database carries a marker")
}

// TestTopologyGenerationNeedsBothFiles: pgdog.toml of one generation with users.toml of
// another (a crash between the two renames) shows no generation, never a wrong one.
func TestTopologyGenerationNeedsBothFiles(t *testing.T) {
	rec := shardmap.NewPgHash("app", shardmap.Key{Column: "id", Type: shardmap.Bigint}, backends(2)...)
	f1 := renderPgDog(t, rec)
	rec.Generation = 2
	f2 := renderPgDog(t, rec)
	cfg, _ := f2.Get(refrouter.ConfigFile)
	users, _ := f1.Get(refrouter.UsersFile)
	mixed, err := render.NewFiles(cfg, users)
	require.NoError(t, err)
	top, err := refrouter.ParseFiles(mixed)
	require.NoError(t, err)
	_, known := top.Generation("app")
	require.False(t, known)
	top, err = refrouter.ParseFiles(f2)
	require.NoError(t, err)
	g, known := top.Generation("app")
	require.True(t, known)
	require.Equal(t, uint64(2), g)
}

// TestMappingRuleOrder: list rules first, then ranges, then the default (pgdog.md §2).
func TestMappingRuleOrder(t *testing.T) {
	rng := shardmap.NewPgHash("app", shardmap.Key{Column: "tenant", Type: shardmap.Bigint}, backends(3)...)
	rng.Scheme = shardmap.PgRange{Key: rng.Scheme.ShardKey(), Default: u32(2), Ranges: []shardmap.RangeRule{
		{End: val(shardmap.Int(100)), Shard: 0},
		{Start: val(shardmap.Int(100)), End: val(shardmap.Int(1000)), Shard: 1},
	}}
	top, err := refrouter.ParseFiles(renderPgDog(t, rng))
	require.NoError(t, err)
	k := top.Databases["app"]
	for key, want := range map[int64]int{-5: 0, 99: 0, 100: 1, 999: 1, 1000: 2, 1 << 40: 2} {
		got, err := k.Shard(key)
		require.NoError(t, err)
		require.Equal(t, want, got, "key %d", key)
	}

	list := shardmap.NewPgHash("app", shardmap.Key{Column: "region", Type: shardmap.Text}, backends(2)...)
	list.Scheme = shardmap.PgList{Key: list.Scheme.ShardKey(), Lists: []shardmap.ListRule{
		{Values: []shardmap.Value{shardmap.Str("eu"), shardmap.Str("uk")}, Shard: 1},
		{Values: []shardmap.Value{shardmap.Str("us")}, Shard: 0},
	}}
	top, err = refrouter.ParseFiles(renderPgDog(t, list))
	require.NoError(t, err)
	k = top.Databases["app"]
	for key, want := range map[string]int{"eu": 1, "uk": 1, "us": 0} {
		got, err := k.Shard(key)
		require.NoError(t, err)
		require.Equal(t, want, got, "key %q", key)
	}
	_, err = k.Shard("jp")
	require.ErrorIs(t, err, refrouter.ErrNoRoute, "no rule and no default: PgDog would scatter, the reference router refuses")
	_, err = k.Shard(1.5)
	require.ErrorIs(t, err, refrouter.ErrNoRoute, "a float is no key")
}

// TestHashKeyForms: a bigint key routes the same given as any Go integer or as its decimal
// text (PgDog parses text parameters as i64), and exactly as pghash says.
func TestHashKeyForms(t *testing.T) {
	hashed := func(t shardmap.KeyType, n int) *refrouter.Database {
		return &refrouter.Database{Name: "app", Shards: make([]*refrouter.Backend, n),
			Scheme: shardmap.PgHash{Key: shardmap.Key{Column: "id", Type: t}, Shards: uint32(n)}}
	}
	rapid.Check(t, func(t *rapid.T) {
		v := rapid.Int64().Draw(t, "v")
		n := rapid.IntRange(1, 64).Draw(t, "n")
		db := hashed(shardmap.Bigint, n)
		want := int(pghash.ShardOfInt8(v, uint64(n)))
		got, err := db.Shard(v)
		require.NoError(t, err)
		require.Equal(t, want, got)
		got, err = db.Shard(fmt.Sprintf(" %d ", v))
		require.NoError(t, err)
		require.Equal(t, want, got)
		if v == int64(int32(v)) {
			got, err = db.Shard(int32(v))
			require.NoError(t, err)
			require.Equal(t, want, got)
		}
	})
	u := hashed(shardmap.UUID, 5)
	id := "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
	b, err := pghash.ParseUUID(id)
	require.NoError(t, err)
	s1, err := u.Shard(id)
	require.NoError(t, err)
	s2, err := u.Shard(b)
	require.NoError(t, err)
	require.Equal(t, int(pghash.ShardOfUUID(b, 5)), s1)
	require.Equal(t, s1, s2)
	_, err = u.Shard("not-a-uuid")
	require.ErrorIs(t, err, refrouter.ErrNoRoute)
}

// TestParseFilesRefuses: files the router cannot route by fail with ErrBadFiles naming
// what is wrong; PgDog's defaults apply where the files are silent.
func TestParseFilesRefuses(t *testing.T) {
	for name, cfg := range map[string]string{
		"syntax":           "[[databases]\n",
		"no name":          "[[databases]]\nhost = \"h\"\n",
		"no host":          "[[databases]]\nname = \"app\"\n",
		"two primaries":    "[[databases]]\nname = \"app\"\nhost = \"a\"\n[[databases]]\nname = \"app\"\nhost = \"b\"\n",
		"auto role":        "[[databases]]\nname = \"app\"\nhost = \"a\"\nrole = \"auto\"\n",
		"bad port":         "[[databases]]\nname = \"app\"\nhost = \"a\"\nport = 70000\n",
		"unknown database": "[[sharded_tables]]\ndatabase = \"nope\"\ncolumn = \"id\"\n",
		"sha1":             "[[databases]]\nname = \"app\"\nhost = \"a\"\n[[sharded_tables]]\ndatabase = \"app\"\ncolumn = \"id\"\nhasher = \"sha1\"\n",
		"vector":           "[[databases]]\nname = \"app\"\nhost = \"a\"\n[[sharded_tables]]\ndatabase = \"app\"\ncolumn = \"id\"\ndata_type = \"vector\"\n",
		"both rule kinds":  "[[databases]]\nname = \"app\"\nhost = \"a\"\nshard = 1\n[[sharded_tables]]\ndatabase = \"app\"\ncolumn = \"id\"\n[[sharded_tables.mapping]]\nvalues = [1]\nshard = 0\n[[sharded_tables.mapping]]\nstart = 5\nshard = 1\n",
		"rule shard":       "[[databases]]\nname = \"app\"\nhost = \"a\"\n[[sharded_tables]]\ndatabase = \"app\"\ncolumn = \"id\"\n[[sharded_tables.mapping]]\nvalues = [1]\nshard = 3\n",
		"value type":       "[[databases]]\nname = \"app\"\nhost = \"a\"\n[[sharded_tables]]\ndatabase = \"app\"\ncolumn = \"id\"\n[[sharded_tables.mapping]]\nvalues = [\"x\"]\nshard = 0\n",
	} {
		t.Run(name, func(t *testing.T) {
			fs, err := render.NewFiles(render.File{Name: refrouter.ConfigFile, Data: []byte(cfg)})
			require.NoError(t, err)
			_, err = refrouter.ParseFiles(fs)
			require.ErrorIs(t, err, refrouter.ErrBadFiles)
			require.Contains(t, err.Error(), refrouter.ConfigFile)
		})
	}
	fs, err := render.NewFiles(render.File{Name: refrouter.ConfigFile, Data: []byte("[[databases]]\nname = \"app\"\nhost = \"a\"\n[[databases]]\nname = \"app\"\nhost = \"b\"\nshard = 2\n")})
	require.NoError(t, err)
	top, err := refrouter.ParseFiles(fs)
	require.NoError(t, err)
	db := top.Databases["app"]
	require.Len(t, db.Shards, 3, "the shard count is the highest shard number plus one")
	require.Nil(t, db.Shards[1], "a gap is a shard without a primary")
	require.Equal(t, refrouter.Backend{Host: "a", Port: 5432, Database: "app"}, *db.Shards[0], "port and database_name defaults")
	_, err = db.Shard(int64(1))
	require.ErrorIs(t, err, refrouter.ErrNoRoute, "three shards and no key")
}

// FuzzParseFiles: any bytes in either file give a topology or an ErrBadFiles, never a panic;
// a topology routes every key to a shard inside its shard list.
func FuzzParseFiles(f *testing.F) {
	rec := shardmap.NewPgHash("app", shardmap.Key{Column: "id", Type: shardmap.Bigint}, backends(3)...)
	for _, fl := range renderPgDog(f, rec) {
		f.Add(fl.Data, []byte(nil))
	}
	f.Add([]byte("[[databases]]\nname = \"app\"\nhost = \"a\"\nshard = 2\n[[sharded_tables]]\ndatabase = \"app\"\ncolumn = \"id\"\n[[sharded_tables.mapping]]\nstart = 5\nshard = 1\n"), []byte("[[users]]\nname = \"app\"\ndatabase = \"app\"\n"))
	f.Fuzz(func(t *testing.T, cfg, users []byte) {
		fs, err := render.NewFiles(render.File{Name: refrouter.ConfigFile, Data: cfg}, render.File{Name: refrouter.UsersFile, Data: users})
		require.NoError(t, err)
		top, err := refrouter.ParseFiles(fs)
		if err != nil {
			require.ErrorIs(t, err, refrouter.ErrBadFiles)
			return
		}
		for _, db := range top.Databases {
			for _, key := range []any{int64(0), int64(-1), "eu", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"} {
				s, err := db.Shard(key)
				if err == nil {
					require.True(t, s >= 0 && s < len(db.Shards), "shard %d of %d", s, len(db.Shards))
				}
			}
		}
	})
}
