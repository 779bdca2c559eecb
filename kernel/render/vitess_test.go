package render

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/shardmap"
)

// TestVtgatePasswordVectors: the hashes match the ones Vitess's own tests accept for
// each password (testdata/vtgate_password_vectors.tsv).
func TestVtgatePasswordVectors(t *testing.T) {
	f, err := os.Open("testdata/vtgate_password_vectors.tsv")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		cols := strings.Split(sc.Text(), "\t")
		require.Len(t, cols, 3, sc.Text())
		switch cols[0] {
		case "MysqlNativePassword":
			require.Equal(t, cols[2], MysqlNativePasswordHash(Secret(cols[1])), cols[1])
		case "CachingSha2Password":
			require.Equal(t, cols[2], CachingSha2PasswordHash(Secret(cols[1])), cols[1])
		default:
			t.Fatalf("unknown field %q", cols[0])
		}
		n++
	}
	require.NoError(t, sc.Err())
	require.Equal(t, 7, n)
}

// vschemaIn is the VSchema as far as the renderer writes it, read back strictly.
type vschemaIn struct {
	Sharded  bool `json:"sharded"`
	Vindexes map[string]struct {
		Type string `json:"type"`
	} `json:"vindexes"`
	Tables map[string]struct {
		ColumnVindexes []struct {
			Column string `json:"column"`
			Name   string `json:"name"`
		} `json:"column_vindexes"`
		AutoIncrement *struct {
			Column   string `json:"column"`
			Sequence string `json:"sequence"`
		} `json:"auto_increment"`
	} `json:"tables"`
}

// authIn has the fields of vtgate's AuthServerStaticEntry; decoding refuses any other.
type authIn map[string][]struct {
	MysqlNativePassword string
	CachingSha2Password string
	Password            string
	UserData            string
	Groups              []string
	SourceHost          string
}

func strictJSON(t testing.TB, data []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(v), "%s", data)
}

func TestVitessParsesBack(t *testing.T) {
	rec := vitessRecord()
	cr := creds()
	fs, err := Vitess(rec, cr, VitessOptions{AutoIncrement: []AutoIncrement{{Table: "corder", Column: "order_id", Sequence: "main.corder_seq"}}})
	require.NoError(t, err)
	require.Equal(t, []string{"customer.vschema.json", VtgateAuthFile}, fs.Names())

	vsf, _ := fs.Get(VSchemaFile("customer"))
	var vs vschemaIn
	strictJSON(t, vsf.Data, &vs)
	require.True(t, vs.Sharded)
	require.Len(t, vs.Vindexes, 1)
	require.Equal(t, "hash", vs.Vindexes["hash"].Type)
	require.Len(t, vs.Tables, 2)
	for _, tbl := range []string{"customer", "corder"} {
		cv := vs.Tables[tbl].ColumnVindexes
		require.Len(t, cv, 1, tbl)
		require.Equal(t, "customer_id", cv[0].Column)
		require.Equal(t, "hash", cv[0].Name)
	}
	require.Nil(t, vs.Tables["customer"].AutoIncrement)
	require.Equal(t, "main.corder_seq", vs.Tables["corder"].AutoIncrement.Sequence)
	require.Equal(t, "order_id", vs.Tables["corder"].AutoIncrement.Column)

	af, _ := fs.Get(VtgateAuthFile)
	var auth authIn
	strictJSON(t, af.Data, &auth)
	require.Len(t, auth, 3)
	for _, u := range append(cr.Users, cr.SchemaAdmin) {
		entries := auth[u.Name]
		require.Len(t, entries, 1, u.Name)
		e := entries[0]
		require.Equal(t, MysqlNativePasswordHash(u.Password), e.MysqlNativePassword)
		require.Equal(t, CachingSha2PasswordHash(u.Password), e.CachingSha2Password)
		require.Empty(t, e.Password, "no plain-text password in the auth file")
		require.Equal(t, u.Name, e.UserData)
		require.Equal(t, u.Groups, e.Groups)
	}
	for _, s := range secrets(cr) {
		require.NotContains(t, string(af.Data), s)
		require.NotContains(t, string(vsf.Data), s)
	}

	x := vitessRecord()
	x.Scheme = shardmap.Vindex{Key: shardmap.Key{Column: "email", Type: shardmap.Text, Tables: []string{"accounts"}}, Kind: shardmap.VindexXXHash, Ranges: x.Scheme.(shardmap.Vindex).Ranges}
	fs, err = Vitess(x, cr, VitessOptions{})
	require.NoError(t, err)
	vsf, _ = fs.Get(VSchemaFile("customer"))
	vs = vschemaIn{}
	strictJSON(t, vsf.Data, &vs)
	require.Equal(t, "xxhash", vs.Vindexes["xxhash"].Type)
	require.Equal(t, "email", vs.Tables["accounts"].ColumnVindexes[0].Column)
}

func TestVitessInputErrors(t *testing.T) {
	for _, c := range []struct {
		name, field string
		rec         func() *shardmap.Record
		cr          func(*Credentials)
		opts        VitessOptions
	}{
		{name: "key without tables", field: "record.scheme.key.tables", rec: func() *shardmap.Record {
			r := vitessRecord()
			s := r.Scheme.(shardmap.Vindex)
			s.Key.Tables = nil
			r.Scheme = s
			return r
		}},
		{name: "auto_increment on another table", field: "options.auto_increment[0].table",
			opts: VitessOptions{AutoIncrement: []AutoIncrement{{Table: "nope", Column: "id", Sequence: "main.s"}}}},
		{name: "auto_increment twice", field: "options.auto_increment[1].table",
			opts: VitessOptions{AutoIncrement: []AutoIncrement{{Table: "corder", Column: "id", Sequence: "main.s"}, {Table: "corder", Column: "id", Sequence: "main.s"}}}},
		{name: "auto_increment without sequence", field: "options.auto_increment[0].sequence",
			opts: VitessOptions{AutoIncrement: []AutoIncrement{{Table: "corder", Column: "id"}}}},
		{name: "bad group", field: "credentials.users[0].groups[0]", cr: func(c *Credentials) { c.Users[0].Groups = []string{"a\xffb"} }},
		{name: "empty password", field: "credentials.users[1].password", cr: func(c *Credentials) { c.Users[1].Password = "" }},
		{name: "pgdog record", field: "record.router.kind", rec: func() *shardmap.Record { return hashRecord(2, false) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := vitessRecord()
			if c.rec != nil {
				rec = c.rec()
			}
			cr := creds()
			if c.cr != nil {
				c.cr(&cr)
			}
			_, err := Vitess(rec, cr, c.opts)
			require.ErrorIs(t, err, ErrInput)
			var all *InputErrors
			require.ErrorAs(t, err, &all)
			var fields []string
			for _, p := range all.Problems {
				fields = append(fields, p.Field)
			}
			require.Contains(t, fields, c.field, "%v", err)
			for _, s := range secrets(cr) {
				require.NotContains(t, err.Error(), s)
			}
		})
	}
}
