package render

import (
	"fmt"

	"loam.dev/router/kernel/shardmap"
)

// Fixtures shared by the tests. Every password is distinctive ("pw-..."), so a test can
// look for it in files and error messages.

func backend(i int) shardmap.Backend {
	return shardmap.Backend{Host: fmt.Sprintf("10.0.0.%d", 11+i), Port: 5432, Database: "app"}
}

// withReplica gives shard i's backend a replica on 10.0.1.(11+i):5433.
func withReplica(b shardmap.Backend, i int) shardmap.Backend {
	b.Replicas = []shardmap.Endpoint{{Host: fmt.Sprintf("10.0.1.%d", 11+i), Port: 5433}}
	return b
}

// hashRecord is a serving PgDog record hash-sharded on orders/order_items.customer_id.
func hashRecord(shards int, replicas bool) *shardmap.Record {
	bs := make([]shardmap.Backend, shards)
	for i := range bs {
		bs[i] = backend(i)
		if replicas {
			bs[i] = withReplica(bs[i], i)
		}
	}
	r := shardmap.NewPgHash("app", shardmap.Key{Column: "customer_id", Type: shardmap.Bigint, Tables: []string{"orders", "order_items"}}, bs...)
	r.Generation = 7
	return r
}

func u32(v uint32) *uint32 { return &v }

func iv(v int64) *shardmap.Value { x := shardmap.Int(v); return &x }

// rangeRecord routes tenant_id ranges: below 100 to s0, [100, 1000) to s1, from 1000 to s2.
func rangeRecord() *shardmap.Record {
	r := hashRecord(3, false)
	r.Scheme = shardmap.PgRange{
		Key: shardmap.Key{Column: "tenant_id", Type: shardmap.Integer},
		Ranges: []shardmap.RangeRule{
			{End: iv(100), Shard: 0},
			{Start: iv(100), End: iv(1000), Shard: 1},
			{Start: iv(1000), Shard: 2},
		},
	}
	return r
}

// listValues are text keys chosen to need every kind of TOML escape.
var listValues = [][]string{
	{"eu", "uk", `quo"te`},
	{`back\slash`, "new\nline", "tab\there"},
	{"ünïcødé ☃", "del\x7f", "bell\x07"},
}

// listRecord routes a text region key by lists, with a default shard.
func listRecord() *shardmap.Record {
	r := hashRecord(3, false)
	s := shardmap.PgList{Key: shardmap.Key{Column: "region", Type: shardmap.Text, Tables: []string{"tenants"}}, Default: u32(2)}
	for i, vs := range listValues {
		rule := shardmap.ListRule{Shard: uint32(i)}
		for _, v := range vs {
			rule.Values = append(rule.Values, shardmap.Str(v))
		}
		s.Lists = append(s.Lists, rule)
	}
	r.Scheme = s
	return r
}

// reshardRecord is hashRecord(2) resharding to 4 shards on new backends.
func reshardRecord() *shardmap.Record {
	r := hashRecord(2, true)
	t := shardmap.Layout{Scheme: shardmap.PgHash{Key: r.Scheme.ShardKey(), Shards: 4}}
	for i := range 4 {
		b := shardmap.Backend{Host: fmt.Sprintf("10.1.0.%d", 11+i), Port: 5432, Database: "app"}
		t.Shards = append(t.Shards, shardmap.Shard{Name: fmt.Sprintf("n%d", i), Backend: b, Fence: shardmap.FenceOpen})
	}
	r.Target = &t
	r.State = shardmap.State{Phase: shardmap.Resharding, To: 8}
	return r
}

func vitessRecord() *shardmap.Record {
	bs := []shardmap.Backend{{Host: "10.2.0.11", Port: 3306, Tablet: "zone1-0000000100"}, {Host: "10.2.0.12", Port: 3306, Tablet: "zone1-0000000200"}}
	r, err := shardmap.NewVindex("customer", shardmap.Key{Column: "customer_id", Type: shardmap.Bigint, Tables: []string{"customer", "corder"}}, shardmap.VindexHash, bs...)
	if err != nil {
		panic(err)
	}
	r.Generation = 3
	return r
}

func creds() Credentials {
	return Credentials{
		Users: []User{
			{Name: "reporting", Password: "pw-reporting-\"q\"\\b", Groups: []string{"readers"}},
			{Name: "app", Password: "pw-app-ünï\n", Groups: []string{"writers", "readers"}},
		},
		SchemaAdmin: User{Name: "migrator", Password: "pw-migrator"},
		Admin:       Admin{Password: "pw-admin"},
	}
}

// secrets lists every password in c.
func secrets(c Credentials) []string {
	var out []string
	for _, u := range append(c.Users, c.SchemaAdmin, User{Password: c.Admin.Password}) {
		if u.Password != "" {
			out = append(out, string(u.Password))
		}
	}
	return out
}

func tlsOpts() TLS {
	return TLS{Certificate: "/etc/pgdog/tls/server.crt", PrivateKey: "/etc/pgdog/tls/server.key", ServerCA: "/etc/pgdog/tls/shards-ca.pem"}
}

// goldenCase is one rendering checked byte for byte against testdata/<name>/.
type goldenCase struct {
	name   string
	render func() (Files, error)
}

var goldenCases = []goldenCase{
	{"pgdog_hash", func() (Files, error) { return PgDog(hashRecord(2, true), creds(), PgDogOptions{TLS: tlsOpts()}) }},
	{"pgdog_range", func() (Files, error) { return PgDog(rangeRecord(), creds(), PgDogOptions{TLS: tlsOpts()}) }},
	{"pgdog_list_branches", func() (Files, error) {
		tls := tlsOpts()
		tls.ServerVerify = VerifyCA
		return PgDog(listRecord(), creds(), PgDogOptions{TLS: tls, Branches: []Branch{
			{Name: "staging", Backends: []shardmap.Backend{
				{Host: "10.9.0.1", Port: 5432, Database: "app_staging"},
				{Host: "10.9.0.2", Port: 5432, Database: "app_staging"},
				{Host: "10.9.0.3", Port: 5432, Database: "app_staging"},
			}},
		}})
	}},
	{"pgdog_resharding", func() (Files, error) { return PgDog(reshardRecord(), creds(), PgDogOptions{TLS: tlsOpts()}) }},
	{"pgdog_insecure", func() (Files, error) {
		c := creds()
		c.SchemaAdmin = User{}
		return PgDog(hashRecord(1, false), c, PgDogOptions{TLS: TLS{Insecure: true}})
	}},
	{"vitess", func() (Files, error) {
		return Vitess(vitessRecord(), creds(), VitessOptions{AutoIncrement: []AutoIncrement{{Table: "corder", Column: "order_id", Sequence: "main.corder_seq"}}})
	}},
}
