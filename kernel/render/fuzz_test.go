package render

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"loam.dev/router/kernel/shardmap"
)

// FuzzPgDog renders a list-sharded record whose user, password, admin password, text key
// values, branch name and TLS path come from the fuzzer, then reads both files back: every
// name and value must come back exactly, or the input must be refused with ErrInput /
// shardmap.ErrInvalid and an error that does not quote the password.
func FuzzPgDog(f *testing.F) {
	f.Add("app", "pw-\"q\"\\", "pw-admin", "eu", "new\nline", "dev", "/etc/tls/a b.pem")
	f.Add("ünï", "pw-☃\t", "x", `quo"te`, "\x7f", "staging", `C:\tls\cert.pem`)
	f.Add("", "", "", "", "", "", "")
	f.Add("a\x00", "pw-\xff", "pw", "67e55044-10b1-426f-9247-bb680e5fe0c8", "eu", "Dev", "\n")
	f.Fuzz(func(t *testing.T, user, password, adminPassword, v1, v2, branch, path string) {
		rec := hashRecord(2, false)
		rec.Scheme = shardmap.PgList{
			Key:   shardmap.Key{Column: "region", Type: shardmap.Text, Tables: []string{"tenants"}},
			Lists: []shardmap.ListRule{{Values: []shardmap.Value{shardmap.Str(v1)}, Shard: 0}, {Values: []shardmap.Value{shardmap.Str(v2)}, Shard: 1}},
		}
		cr := Credentials{Users: []User{{Name: user, Password: Secret(password)}}, Admin: Admin{Password: Secret(adminPassword)}}
		tls := TLS{Certificate: path, PrivateKey: path + ".key", ServerCA: path + ".ca"}
		var opts PgDogOptions
		opts.TLS = tls
		if branch != "" {
			opts.Branches = []Branch{{Name: branch, Backends: []shardmap.Backend{backend(5), backend(6)}}}
		}
		fs, err := PgDog(rec, cr, opts)
		if err != nil {
			if !errors.Is(err, ErrInput) && !errors.Is(err, shardmap.ErrInvalid) {
				t.Fatalf("error is neither ErrInput nor shardmap.ErrInvalid: %v", err)
			}
			for _, s := range []string{password, adminPassword} {
				if len(s) >= 6 && !strings.Contains(user+v1+v2+branch+path, s) && strings.Contains(err.Error(), s) {
					t.Fatalf("error quotes a password: %v", err)
				}
			}
			return
		}
		cfg, users := parsePgDog(t, fs)
		if cfg.General["tls_certificate"] != path || cfg.General["tls_private_key"] != path+".key" || cfg.General["tls_server_ca_certificate"] != path+".ca" {
			t.Fatalf("TLS paths changed: %v", cfg.General)
		}
		var values []any
		for _, tb := range cfg.ShardedTables {
			if tb.Database == "app" {
				for _, m := range tb.Mapping {
					values = append(values, m.Values...)
				}
			}
		}
		if len(values) != 2 || values[0] != v1 || values[1] != v2 {
			t.Fatalf("list values came back as %q, want %q and %q", values, v1, v2)
		}
		if users.Admin.Password != adminPassword {
			t.Fatalf("admin password changed")
		}
		found := 0
		for _, u := range users.Users {
			if u.Name == user {
				found++
				if u.Password != password {
					t.Fatalf("password of %q changed", user)
				}
			}
		}
		want := 1
		if branch != "" {
			want = 2
		}
		if found != want {
			t.Fatalf("user %q has %d entries, want %d", user, found, want)
		}
		if branch != "" && !hasDatabase(cfg, BranchDatabase("app", branch)) {
			t.Fatalf("branch %q missing", branch)
		}
	})
}

func hasDatabase(cfg pgdogTOML, name string) bool {
	for _, d := range cfg.Databases {
		if d.Name == name {
			return true
		}
	}
	return false
}

// FuzzVitess renders vtgate's auth file and a VSchema from fuzzed names and reads them back.
func FuzzVitess(f *testing.F) {
	f.Add("app", "pw", "writers", "order_id", "main.seq")
	f.Add("ü\"<&>", "pw\x00", "a\nb", "", "")
	f.Fuzz(func(t *testing.T, user, password, group, column, sequence string) {
		cr := Credentials{Users: []User{{Name: user, Password: Secret(password), Groups: []string{group}}}}
		fs, err := Vitess(vitessRecord(), cr, VitessOptions{AutoIncrement: []AutoIncrement{{Table: "corder", Column: column, Sequence: sequence}}})
		if err != nil {
			if !errors.Is(err, ErrInput) {
				t.Fatalf("not ErrInput: %v", err)
			}
			if len(password) >= 6 && !strings.Contains(user+group+column+sequence, password) && strings.Contains(err.Error(), password) {
				t.Fatalf("error quotes the password: %v", err)
			}
			return
		}
		af, _ := fs.Get(VtgateAuthFile)
		var auth authIn
		strictJSON(t, af.Data, &auth)
		e := auth[user]
		if len(auth) != 1 || len(e) != 1 || e[0].UserData != user || len(e[0].Groups) != 1 || e[0].Groups[0] != group ||
			e[0].MysqlNativePassword != MysqlNativePasswordHash(Secret(password)) {
			t.Fatalf("auth file does not read back: %s", af.Data)
		}
		vf, _ := fs.Get(VSchemaFile("customer"))
		var vs vschemaIn
		strictJSON(t, vf.Data, &vs)
		ai := vs.Tables["corder"].AutoIncrement
		if ai == nil || ai.Column != column || ai.Sequence != sequence {
			t.Fatalf("auto_increment does not read back: %s", vf.Data)
		}
	})
}

// FuzzParseGenerationDatabase: whatever parses is exactly what GenerationDatabase writes.
func FuzzParseGenerationDatabase(f *testing.F) {
	for _, s := range []string{"app__generation_7", "app___generation_1", "a__generation_0", "__generation_1", "a__b__generation_2", "x__generation_18446744073709551616"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		db, g, ok := ParseGenerationDatabase(name)
		if !ok {
			return
		}
		if g == 0 || db == "" || strings.Contains(db, "__") || GenerationDatabase(db, g) != name {
			t.Fatalf("%q parsed as %q, %d, which writes back as %q", name, db, g, GenerationDatabase(db, g))
		}
	})
}

// FuzzGenerationFromAnnotations: an accepted annotation is exactly what Annotations writes.
func FuzzGenerationFromAnnotations(f *testing.F) {
	for _, s := range []string{"1", "0", "07", "+7", "18446744073709551615", "18446744073709551616", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		g, err := GenerationFromAnnotations(map[string]string{AnnotationGeneration: v})
		if err != nil {
			return
		}
		if g == 0 || strconv.FormatUint(g, 10) != v {
			t.Fatalf("%q accepted as %d", v, g)
		}
	})
}
