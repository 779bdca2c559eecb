package render

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	burnt "github.com/BurntSushi/toml"
	gotoml "github.com/pelletier/go-toml/v2"
	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/shardmap"
)

// The shapes PgDog reads, as far as the renderer writes them. Decoding is strict (unknown
// keys fail), as PgDog's is.

type pgdogTOML struct {
	General       map[string]any `toml:"general"`
	Databases     []databaseTOML `toml:"databases"`
	ShardedTables []tableTOML    `toml:"sharded_tables"`
}

type databaseTOML struct {
	Name         string `toml:"name"`
	Shard        int64  `toml:"shard"`
	Role         string `toml:"role"`
	Host         string `toml:"host"`
	Port         int64  `toml:"port"`
	DatabaseName string `toml:"database_name"`
}

type tableTOML struct {
	Database string        `toml:"database"`
	Name     string        `toml:"name"`
	Column   string        `toml:"column"`
	DataType string        `toml:"data_type"`
	Mapping  []mappingTOML `toml:"mapping"`
}

type mappingTOML struct {
	Values []any `toml:"values"`
	Start  any   `toml:"start"`
	End    any   `toml:"end"`
	Shard  int64 `toml:"shard"`
}

type usersTOML struct {
	Admin struct {
		User     string `toml:"user"`
		Password string `toml:"password"`
	} `toml:"admin"`
	Users []userTOML `toml:"users"`
}

type userTOML struct {
	Name        string `toml:"name"`
	Database    string `toml:"database"`
	Password    string `toml:"password"`
	SchemaAdmin bool   `toml:"schema_admin"`
}

// decodeBoth decodes data with go-toml (strict) and BurntSushi (then checks it left no key
// undecoded) and requires the two to agree, so one parser's quirk cannot pass a file.
func decodeBoth[T any](t testing.TB, data []byte) T {
	t.Helper()
	var a, b T
	dec := gotoml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&a), "go-toml:\n%s", data)
	md, err := burnt.Decode(string(data), &b)
	require.NoError(t, err, "BurntSushi:\n%s", data)
	require.Empty(t, md.Undecoded(), "keys BurntSushi did not map")
	require.Equal(t, a, b, "go-toml and BurntSushi disagree")
	return a
}

func parsePgDog(t testing.TB, fs Files) (pgdogTOML, usersTOML) {
	t.Helper()
	cfg, ok := fs.Get(PgDogConfigFile)
	require.True(t, ok)
	users, ok := fs.Get(PgDogUsersFile)
	require.True(t, ok)
	return decodeBoth[pgdogTOML](t, cfg.Data), decodeBoth[usersTOML](t, users.Data)
}

// wantDatabases is what [[databases]] must hold for one layout under name, computed from
// the layout directly.
func wantDatabases(name string, l shardmap.Layout) []databaseTOML {
	var out []databaseTOML
	for i, s := range l.Shards {
		b := s.Backend
		out = append(out, databaseTOML{name, int64(i), "primary", b.Host, int64(b.Port), b.Database})
		for _, r := range b.Replicas {
			out = append(out, databaseTOML{name, int64(i), "replica", r.Host, int64(r.Port), b.Database})
		}
	}
	return out
}

func tomlValue(v shardmap.Value) any {
	if v.IsText() {
		return v.AsText()
	}
	return v.AsInt()
}

// wantTables is what [[sharded_tables]] must hold for one scheme under database.
func wantTables(database string, s shardmap.Scheme) []tableTOML {
	k := s.ShardKey()
	dt := map[shardmap.KeyType]string{shardmap.Bigint: "bigint", shardmap.Integer: "bigint", shardmap.Text: "varchar", shardmap.UUID: "uuid"}[k.Type]
	var rules []mappingTOML
	switch s := s.(type) {
	case shardmap.PgRange:
		for _, r := range s.Ranges {
			m := mappingTOML{Shard: int64(r.Shard)}
			if r.Start != nil {
				m.Start = tomlValue(*r.Start)
			}
			if r.End != nil {
				m.End = tomlValue(*r.End)
			}
			rules = append(rules, m)
		}
		if s.Default != nil {
			rules = append(rules, mappingTOML{Shard: int64(*s.Default)})
		}
	case shardmap.PgList:
		for _, l := range s.Lists {
			m := mappingTOML{Shard: int64(l.Shard)}
			for _, v := range l.Values {
				m.Values = append(m.Values, tomlValue(v))
			}
			rules = append(rules, m)
		}
		if s.Default != nil {
			rules = append(rules, mappingTOML{Shard: int64(*s.Default)})
		}
	}
	names := k.Tables
	if len(names) == 0 {
		names = []string{""}
	}
	var out []tableTOML
	for _, n := range names {
		out = append(out, tableTOML{Database: database, Name: n, Column: k.Column, DataType: dt, Mapping: rules})
	}
	return out
}

// TestPgDogParsesBack reads every rendered pgdog.toml and users.toml back with two TOML
// parsers and checks that every shard, replica, table, mapping rule and user is there,
// with the values of the record and credentials.
func TestPgDogParsesBack(t *testing.T) {
	type tc struct {
		name     string
		rec      *shardmap.Record
		opts     PgDogOptions
		branches map[string][]shardmap.Backend
	}
	staging := []shardmap.Backend{
		{Host: "10.9.0.1", Port: 5432, Database: "app_staging"},
		{Host: "10.9.0.2", Port: 6432, Database: "app_staging", Replicas: []shardmap.Endpoint{{Host: "10.9.1.2", Port: 5432}}},
	}
	cases := []tc{
		{name: "hash", rec: hashRecord(4, true)},
		{name: "hash-no-tables", rec: func() *shardmap.Record {
			r := hashRecord(2, false)
			r.Scheme = shardmap.PgHash{Key: shardmap.Key{Column: "id", Type: shardmap.UUID}, Shards: 2}
			return r
		}()},
		{name: "range", rec: rangeRecord()},
		{name: "list", rec: listRecord()},
		{name: "reshard", rec: reshardRecord()},
		{name: "branches", rec: hashRecord(2, false), opts: PgDogOptions{Branches: []Branch{{Name: "staging", Backends: staging}}},
			branches: map[string][]shardmap.Backend{"staging": staging}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.opts.TLS = tlsOpts()
			cr := creds()
			fs, err := PgDog(c.rec, cr, c.opts)
			require.NoError(t, err)
			cfg, users := parsePgDog(t, fs)
			db := c.rec.Router.Name

			require.Equal(t, map[string]any{
				"auth_type": "scram", "passthrough_auth": "disabled", "cutover_save_config": false,
				"tls_certificate": c.opts.TLS.Certificate, "tls_private_key": c.opts.TLS.PrivateKey,
				"tls_client_required": true, "tls_verify": "verify_full", "tls_server_ca_certificate": c.opts.TLS.ServerCA,
			}, cfg.General)

			wantDBs := wantDatabases(db, c.rec.Layout)
			wantTbl := wantTables(db, c.rec.Scheme)
			onDBs := []string{db}
			if c.rec.Target != nil {
				r := ReshardDatabase(db, c.rec.Generation)
				wantDBs = append(wantDBs, wantDatabases(r, *c.rec.Target)...)
				wantTbl = append(wantTbl, wantTables(r, c.rec.Target.Scheme)...)
				onDBs = append(onDBs, r)
			}
			adminDBs := slices.Clone(onDBs)
			for name, bs := range c.branches {
				bl := branchLayout(c.rec.Layout, Branch{Name: name, Backends: bs})
				wantDBs = append(wantDBs, wantDatabases(BranchDatabase(db, name), bl)...)
				wantTbl = append(wantTbl, wantTables(BranchDatabase(db, name), c.rec.Scheme)...)
				onDBs = append(onDBs, BranchDatabase(db, name))
			}
			marker := GenerationDatabase(db, c.rec.Generation)
			s0 := c.rec.Shards[0].Backend
			wantDBs = append(wantDBs, databaseTOML{marker, 0, "primary", s0.Host, int64(s0.Port), s0.Database})
			require.ElementsMatch(t, wantDBs, cfg.Databases)
			require.ElementsMatch(t, wantTbl, cfg.ShardedTables)

			require.Equal(t, "admin", users.Admin.User)
			require.Equal(t, string(cr.Admin.Password), users.Admin.Password)
			var wantUsers []userTOML
			for _, u := range cr.Users {
				for _, d := range onDBs {
					wantUsers = append(wantUsers, userTOML{Name: u.Name, Database: d, Password: string(u.Password)})
				}
			}
			for _, d := range adminDBs {
				wantUsers = append(wantUsers, userTOML{Name: cr.SchemaAdmin.Name, Database: d, Password: string(cr.SchemaAdmin.Password), SchemaAdmin: true})
			}
			wantUsers = append(wantUsers, userTOML{Name: GenerationUser, Database: marker})
			require.ElementsMatch(t, wantUsers, users.Users)
		})
	}
}

// knownKeys reads testdata/pgdog_known_keys.txt: file -> table -> key -> allowed values
// (nil when any value of the key's type is allowed).
func knownKeys(t testing.TB) map[string]map[string]map[string][]string {
	t.Helper()
	f, err := os.Open("testdata/pgdog_known_keys.txt")
	require.NoError(t, err)
	defer f.Close()
	out := map[string]map[string]map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		require.GreaterOrEqual(t, len(fields), 3, line)
		if out[fields[0]] == nil {
			out[fields[0]] = map[string]map[string][]string{}
		}
		if out[fields[0]][fields[1]] == nil {
			out[fields[0]][fields[1]] = map[string][]string{}
		}
		var allowed []string
		if len(fields) == 4 {
			allowed = strings.Split(fields[3], "|")
		}
		out[fields[0]][fields[1]][fields[2]] = allowed
	}
	require.NoError(t, sc.Err())
	return out
}

// unknownKeys walks a decoded TOML document and reports every key the table it is in does
// not declare, every enum value outside the allowed ones, and every deprecated section.
func unknownKeys(known map[string]map[string][]string, table string, doc map[string]any) []string {
	var bad []string
	keys := known[table]
	for k, v := range doc {
		allowed, ok := keys[k]
		if !ok {
			bad = append(bad, fmt.Sprintf("%s.%s is not a key PgDog knows", table, k))
			continue
		}
		if table == "-" && k == "sharded_mappings" {
			bad = append(bad, "sharded_mappings is deprecated in PgDog (a warning on every load); use [[sharded_tables.mapping]]")
		}
		if s, isStr := v.(string); isStr && allowed != nil && !slices.Contains(allowed, s) {
			bad = append(bad, fmt.Sprintf("%s.%s = %q is not one of %v", table, k, s, allowed))
		}
		sub := k
		if table != "-" {
			sub = table + "." + k
		}
		switch v := v.(type) {
		case map[string]any:
			bad = append(bad, unknownKeys(known, sub, v)...)
		case []any:
			for _, e := range v {
				if m, isMap := e.(map[string]any); isMap {
					bad = append(bad, unknownKeys(known, sub, m)...)
				}
			}
		}
	}
	return bad
}

func checkKnownKeys(t testing.TB, known map[string]map[string]map[string][]string, fs Files) []string {
	t.Helper()
	var bad []string
	for _, name := range []string{PgDogConfigFile, PgDogUsersFile} {
		f, ok := fs.Get(name)
		require.True(t, ok)
		var doc map[string]any
		require.NoError(t, gotoml.Unmarshal(f.Data, &doc))
		bad = append(bad, unknownKeys(known[name], "-", doc)...)
	}
	return bad
}

// TestPgDogKnownKeys checks that every key of every PgDog golden case is one PgDog
// declares for that table, with an allowed value where the key is an enum. PgDog refuses
// to load a file with an unknown key.
func TestPgDogKnownKeys(t *testing.T) {
	known := knownKeys(t)
	for _, c := range goldenCases {
		if !strings.HasPrefix(c.name, "pgdog") {
			continue
		}
		fs, err := c.render()
		require.NoError(t, err)
		require.Empty(t, checkKnownKeys(t, known, fs), c.name)
	}
}

// TestPgDogKnownKeysCatches shows the check above can fail: a file with a misspelt key, a
// deprecated section and an enum value PgDog lacks is reported on each count.
func TestPgDogKnownKeysCatches(t *testing.T) {
	known := knownKeys(t)
	fs, err := NewFiles(
		File{Name: PgDogConfigFile, Data: []byte("[general]\ntls_verify = \"verify-full\"\n[[databases]]\nname = \"a\"\nhost = \"h\"\nshards = 1\n[[sharded_mappings]]\ndatabase = \"a\"\ncolumn = \"c\"\nshard = 0\n[control]\nx = 1\n")},
		File{Name: PgDogUsersFile, Data: []byte("[[users]]\nname = \"u\"\ndatabase = \"a\"\npasswd = \"p\"\n")},
	)
	require.NoError(t, err)
	bad := strings.Join(checkKnownKeys(t, known, fs), "\n")
	for _, want := range []string{"tls_verify = \"verify-full\"", "databases.shards", "sharded_mappings is deprecated", "-.control", "users.passwd"} {
		require.Contains(t, bad, want)
	}
}

// TestPgDogConfigHasNoSecret: pgdog.toml can go to a ConfigMap because no password is in
// it, while users.toml has every one of them.
func TestPgDogConfigHasNoSecret(t *testing.T) {
	cr := creds()
	for _, rec := range []*shardmap.Record{hashRecord(3, true), rangeRecord(), listRecord(), reshardRecord()} {
		fs, err := PgDog(rec, cr, PgDogOptions{TLS: tlsOpts()})
		require.NoError(t, err)
		cfg, _ := fs.Get(PgDogConfigFile)
		users, _ := fs.Get(PgDogUsersFile)
		_, parsed := parsePgDog(t, fs)
		var found []string
		for _, u := range parsed.Users {
			found = append(found, u.Password)
		}
		found = append(found, parsed.Admin.Password)
		for _, s := range secrets(cr) {
			require.NotContains(t, string(cfg.Data), s)
			require.NotContains(t, string(cfg.Data), strings.ReplaceAll(s, "\n", `\n`))
			require.Contains(t, found, s)
		}
		require.NotEmpty(t, users.Data)
	}
}
