package shardmap_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"loam.dev/router/kernel/keyrange"
	"loam.dev/router/kernel/pghash"
	sm "loam.dev/router/kernel/shardmap"
	vdx "loam.dev/router/kernel/vindex"
)

// Facts measured on Vitess (reference/vitess.md §4): with the hash vindex and four shards,
// ids 1 and 2 go to -40, 3 and 5 to 40-80, 4 and 6 to c0-.
func TestLocateVitessFacts(t *testing.T) {
	r := vindex(t, 4)
	for id, want := range map[string]string{"1": "-40", "2": "-40", "3": "40-80", "5": "40-80", "4": "c0-", "6": "c0-"} {
		loc, err := r.Locate(id)
		require.NoError(t, err)
		require.Equal(t, want, loc.Name, "id %s: %s", id, loc.Why)
	}
}

// Through shardmap + keyrange, a key lands where the vindex and the partition put it when
// computed directly, for any partition of the keyspace.
func TestLocateVindexMatchesDirect(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 64).Draw(t, "shards")
		r := vindex(t, n)
		p, err := keyrange.NewPartition(r.Scheme.(sm.Vindex).Ranges)
		require.NoError(t, err)
		id := rapid.Int64().Draw(t, "id")
		loc, err := r.Locate(strconv.FormatInt(id, 10))
		require.NoError(t, err)
		require.Equal(t, p.Lookup(vdx.Hash(uint64(id))), loc.Shard)

		x := r.Clone()
		s := x.Scheme.(sm.Vindex)
		s.Kind, s.Key.Type = sm.VindexXXHash, sm.Text
		x.Scheme = s
		key := rapid.String().Draw(t, "key")
		loc, err = x.Locate(key)
		require.NoError(t, err)
		require.Equal(t, p.Lookup(vdx.XXHashString(key)), loc.Shard)
	})
}

// pg_hash layouts route exactly as Postgres hash partitioning (kernel/pghash).
func TestLocatePgHashMatchesDirect(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 64).Draw(t, "shards")
		r := pgHash(n)
		v := rapid.Int64().Draw(t, "v")
		loc, err := r.Locate(strconv.FormatInt(v, 10))
		require.NoError(t, err)
		require.Equal(t, int(pghash.ShardOfInt8(v, uint64(n))), loc.Shard, loc.Why)

		txt := r.Clone()
		txt.Scheme = sm.PgHash{Key: sm.Key{Column: "k", Type: sm.Text}, Shards: uint32(n)}
		s := rapid.String().Draw(t, "s")
		loc, err = txt.Locate(s)
		require.NoError(t, err)
		require.Equal(t, int(pghash.ShardOfText(s, uint64(n))), loc.Shard)
	})
}

func TestLocateRulesAndDefaults(t *testing.T) {
	r := pgRange() // (min,100) -> 0, [100,200) -> 1, [200,max) -> 2
	for key, want := range map[string]int{"-5": 0, "99": 0, "100": 1, "199": 1, "200": 2, " 12345 ": 2} {
		loc, err := r.Locate(key)
		require.NoError(t, err)
		require.Equal(t, want, loc.Shard, "%q: %s", key, loc.Why)
	}
	_, err := r.Locate("ten")
	require.ErrorIs(t, err, sm.ErrBadKey)

	l := pgList() // eu, uk -> 0; us -> 1; default 1
	loc, err := l.Locate("uk")
	require.NoError(t, err)
	require.Equal(t, 0, loc.Shard)
	require.Contains(t, loc.Why, "lists[0]")
	loc, err = l.Locate("fr")
	require.NoError(t, err)
	require.Equal(t, 1, loc.Shard)
	require.Contains(t, loc.Why, "default")
	s := l.Scheme.(sm.PgList)
	s.Default = nil
	l.Scheme = s
	_, err = l.Locate("fr")
	require.ErrorIs(t, err, sm.ErrNoShard)

	null, err := pgHash(3).LocateNull()
	require.NoError(t, err)
	require.Equal(t, 0, null.Shard)
	_, err = pgRange().LocateNull()
	require.ErrorIs(t, err, sm.ErrNoShard)
}

func FuzzLocate(f *testing.F) {
	for _, s := range []string{"42", "-1", " 7 ", "eu", "", "x", "9223372036854775808", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"} {
		f.Add(s)
	}
	layouts := []*sm.Record{pgHash(4), pgRange(), pgList(), vindex(f, 4)}
	uuidList := pgList()
	uuidList.Scheme = sm.PgList{Key: sm.Key{Column: "u", Type: sm.UUID}, Lists: []sm.ListRule{{Values: []sm.Value{sm.Str("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")}, Shard: 1}}, Default: u32(0)}
	layouts = append(layouts, uuidList)
	f.Fuzz(func(t *testing.T, key string) {
		for _, r := range layouts {
			loc, err := r.Locate(key)
			if err != nil {
				if !errors.Is(err, sm.ErrBadKey) && !errors.Is(err, sm.ErrNoShard) {
					t.Fatalf("%s: %q: unexpected error %v", sm.SchemeKind(r.Scheme), key, err)
				}
				continue
			}
			if loc.Shard < 0 || loc.Shard >= len(r.Shards) || r.Shards[loc.Shard].Name != loc.Name {
				t.Fatalf("%s: %q: bad location %+v", sm.SchemeKind(r.Scheme), key, loc)
			}
		}
	})
}
