package vitessdiff

// These tests check what kernel/render writes for Vitess with Vitess's own code: vtgate's
// static auth file through the AuthServerStatic that vtgate runs, and the VSchema through
// the parser and builder vtctld's ApplyVSchema uses.

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"vitess.io/vitess/go/json2"
	"vitess.io/vitess/go/mysql"
	vschemapb "vitess.io/vitess/go/vt/proto/vschema"
	"vitess.io/vitess/go/vt/sqlparser"
	"vitess.io/vitess/go/vt/vtgate/vindexes"

	"loam.dev/router/kernel/render"
	"loam.dev/router/kernel/shardmap"
)

const alphabet = "aZ09_-.@\"'\\/ \t\nüé☃🦫<>&{}[]:,$%"

func randomText(r *rand.Rand, min int) string {
	runes := []rune(alphabet)
	n := min + r.IntN(12)
	var b strings.Builder
	for range n {
		b.WriteRune(runes[r.IntN(len(runes))])
	}
	return b.String()
}

func record(t *testing.T, kind shardmap.VindexKind, keyType shardmap.KeyType, tables ...string) *shardmap.Record {
	rec, err := shardmap.NewVindex("customer", shardmap.Key{Column: "customer_id", Type: keyType, Tables: tables}, kind,
		shardmap.Backend{Host: "10.2.0.11", Port: 3306}, shardmap.Backend{Host: "10.2.0.12", Port: 3306},
		shardmap.Backend{Host: "10.2.0.13", Port: 3306}, shardmap.Backend{Host: "10.2.0.14", Port: 3306})
	require.NoError(t, err)
	return rec
}

// TestVtgateAcceptsRenderedAuth: for random users, vtgate's static auth server loads the
// rendered file, admits each user's password through both mysql_native_password and
// caching_sha2_password with a random salt, refuses a wrong password, and reports the
// rendered UserData and Groups.
func TestVtgateAcceptsRenderedAuth(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		var creds render.Credentials
		seen := map[string]bool{}
		for range 1 + r.IntN(4) {
			u := render.User{Name: randomText(r, 1), Password: render.Secret(randomText(r, 1))}
			if seen[u.Name] {
				continue
			}
			seen[u.Name] = true
			for range r.IntN(3) {
				u.Groups = append(u.Groups, randomText(r, 1))
			}
			creds.Users = append(creds.Users, u)
		}
		files, err := render.Vitess(record(t, shardmap.VindexHash, shardmap.Bigint, "corder"), creds, render.VitessOptions{})
		require.NoError(t, err, "round %d", round)
		f, ok := files.Get(render.VtgateAuthFile)
		require.True(t, ok)

		var cfg map[string][]*mysql.AuthServerStaticEntry
		require.NoError(t, mysql.ParseConfig(f.Data, &cfg), "%s", f.Data)
		auth := mysql.NewAuthServerStatic("", string(f.Data), 0)
		for _, u := range creds.Users {
			require.Len(t, cfg[u.Name], 1)
			salt := make([]byte, 20)
			for i := range salt {
				salt[i] = byte(1 + r.IntN(127))
			}
			pw := []byte(u.Password)
			got, err := auth.UserEntryWithHash(nil, salt, u.Name, mysql.ScrambleMysqlNativePassword(salt, pw), nil)
			require.NoError(t, err, "mysql_native_password for %q", u.Name)
			sd := got.(*mysql.StaticUserData)
			require.Equal(t, u.Name, sd.Get().Username)
			require.Equal(t, u.Groups, sd.Get().Groups)
			_, err = auth.UserEntryWithHash(nil, salt, u.Name, mysql.ScrambleMysqlNativePassword(salt, append(pw, 'x')), nil)
			require.Error(t, err, "a wrong password must be refused")

			_, state, err := auth.UserEntryWithCacheHash(nil, salt, u.Name, mysql.ScrambleCachingSha2Password(salt, pw), nil)
			require.NoError(t, err, "caching_sha2_password for %q", u.Name)
			require.Equal(t, mysql.AuthAccepted, state)
			_, _, err = auth.UserEntryWithCacheHash(nil, salt, u.Name, mysql.ScrambleCachingSha2Password(salt, append(pw, 'x')), nil)
			require.Error(t, err)
		}
	}
}

// TestVtctldAcceptsRenderedVSchema: the VSchema decodes strictly (no field vtctld would
// silently drop), decodes the way ApplyVSchema decodes it, and builds with vindexes'
// BuildKeyspace into the tables, vindex and sequence the record and options ask for.
func TestVtctldAcceptsRenderedVSchema(t *testing.T) {
	for _, c := range []struct {
		kind    shardmap.VindexKind
		keyType shardmap.KeyType
		want    string
	}{
		{shardmap.VindexHash, shardmap.Bigint, "hash"},
		{shardmap.VindexXXHash, shardmap.Text, "xxhash"},
	} {
		rec := record(t, c.kind, c.keyType, "customer", "corder", "line_items")
		files, err := render.Vitess(rec, render.Credentials{Users: []render.User{{Name: "app", Password: "pw"}}},
			render.VitessOptions{AutoIncrement: []render.AutoIncrement{{Table: "corder", Column: "order_id", Sequence: "main.corder_seq"}}})
		require.NoError(t, err)
		f, ok := files.Get(render.VSchemaFile("customer"))
		require.True(t, ok)

		var strict vschemapb.Keyspace
		require.NoError(t, protojson.Unmarshal(f.Data, &strict), "a field vtctld does not know")
		var ks vschemapb.Keyspace
		require.NoError(t, json2.UnmarshalPB(f.Data, &ks))
		built, err := vindexes.BuildKeyspace(&ks, sqlparser.NewTestParser())
		require.NoError(t, err)
		require.True(t, built.Keyspace.Sharded)
		require.Len(t, built.Vindexes, 1)
		require.Equal(t, c.want, ks.Vindexes[c.want].Type)
		require.Len(t, built.Tables, 3)
		for _, name := range []string{"customer", "corder", "line_items"} {
			tbl := built.Tables[name]
			require.NotNil(t, tbl, name)
			require.Len(t, tbl.ColumnVindexes, 1)
			cv := tbl.ColumnVindexes[0]
			require.Equal(t, c.want, cv.Name)
			require.Equal(t, "customer_id", cv.Columns[0].String())
			require.True(t, cv.Vindex.IsUnique(), "the primary vindex must be unique")
		}
		require.Equal(t, "main.corder_seq", ks.Tables["corder"].AutoIncrement.Sequence)

		// BuildKeyspace leaves sequences to the whole VSchema: with the sequence's own
		// keyspace beside it, vtgate resolves the auto_increment to that table.
		main := &vschemapb.Keyspace{Tables: map[string]*vschemapb.Table{"corder_seq": {Type: "sequence"}}}
		vs := vindexes.BuildVSchema(&vschemapb.SrvVSchema{Keyspaces: map[string]*vschemapb.Keyspace{"customer": &ks, "main": main}}, sqlparser.NewTestParser())
		require.NoError(t, vs.Keyspaces["customer"].Error)
		ai := vs.Keyspaces["customer"].Tables["corder"].AutoIncrement
		require.NotNil(t, ai)
		require.Equal(t, "order_id", ai.Column.String())
		require.Equal(t, "corder_seq", ai.Sequence.Name.String())
		require.Equal(t, "main", ai.Sequence.Keyspace.Name)
	}
}
