package render

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/kernel/shardmap"
)

// TestRefusesInvalidRecord: a record that fails Validate is refused with its own
// validation error, reachable through errors.Is and errors.As, for both routers.
func TestRefusesInvalidRecord(t *testing.T) {
	bad := hashRecord(3, false)
	bad.Scheme = shardmap.PgHash{Key: bad.Scheme.ShardKey(), Shards: 4}
	_, err := PgDog(bad, creds(), PgDogOptions{TLS: tlsOpts()})
	require.ErrorIs(t, err, shardmap.ErrInvalid)
	var ve *shardmap.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "scheme.shards", ve.Problems[0].Field)
	require.Equal(t, bad.Validate().Error(), errors.Unwrap(err).Error())

	vbad := vitessRecord()
	vbad.Shards[1].Name = "80-c0"
	_, err = Vitess(vbad, creds(), VitessOptions{})
	require.ErrorIs(t, err, shardmap.ErrInvalid)

	_, err = PgDog(nil, creds(), PgDogOptions{TLS: tlsOpts()})
	require.ErrorIs(t, err, ErrInput)
}

// TestInputErrors: each bad input is refused with ErrInput and an *InputError naming the
// field, and no message quotes a password.
func TestInputErrors(t *testing.T) {
	type tc struct {
		name  string
		field string
		run   func(c *Credentials, o *PgDogOptions, r **shardmap.Record)
	}
	cases := []tc{
		{"no users", "credentials.users", func(c *Credentials, _ *PgDogOptions, _ **shardmap.Record) { c.Users = nil }},
		{"empty password", "credentials.users[1].password", func(c *Credentials, _ *PgDogOptions, _ **shardmap.Record) { c.Users[1].Password = "" }},
		{"invalid utf-8 password", "credentials.users[0].password", func(c *Credentials, _ *PgDogOptions, _ **shardmap.Record) {
			c.Users[0].Password = "pw-bad-\xff-utf8"
		}},
		{"NUL in password", "credentials.schema_admin.password", func(c *Credentials, _ *PgDogOptions, _ **shardmap.Record) {
			c.SchemaAdmin.Password = "pw-nul\x00-inside"
		}},
		{"no admin password", "credentials.admin.password", func(c *Credentials, _ *PgDogOptions, _ **shardmap.Record) { c.Admin.Password = "" }},
		{"duplicate user", "credentials.users[1].name", func(c *Credentials, _ *PgDogOptions, _ **shardmap.Record) { c.Users[1].Name = c.Users[0].Name }},
		{"schema admin is an app user", "credentials.schema_admin.name", func(c *Credentials, _ *PgDogOptions, _ **shardmap.Record) {
			c.SchemaAdmin.Name = "app"
		}},
		{"reserved user name", "credentials.users[0].name", func(c *Credentials, _ *PgDogOptions, _ **shardmap.Record) {
			c.Users[0].Name = GenerationUser
		}},
		{"empty user name", "credentials.users[0].name", func(c *Credentials, _ *PgDogOptions, _ **shardmap.Record) { c.Users[0].Name = "" }},
		{"resharding without schema admin", "credentials.schema_admin", func(c *Credentials, _ *PgDogOptions, r **shardmap.Record) {
			*r = reshardRecord()
			c.SchemaAdmin = User{}
		}},
		{"no certificate", "options.tls.certificate", func(_ *Credentials, o *PgDogOptions, _ **shardmap.Record) { o.TLS.Certificate = "" }},
		{"no key", "options.tls.private_key", func(_ *Credentials, o *PgDogOptions, _ **shardmap.Record) { o.TLS.PrivateKey = "" }},
		{"no server CA", "options.tls.server_ca", func(_ *Credentials, o *PgDogOptions, _ **shardmap.Record) { o.TLS.ServerCA = "" }},
		{"bad verify mode", "options.tls.server_verify", func(_ *Credentials, o *PgDogOptions, _ **shardmap.Record) { o.TLS.ServerVerify = 7 }},
		{"insecure with paths", "options.tls", func(_ *Credentials, o *PgDogOptions, _ **shardmap.Record) { o.TLS.Insecure = true }},
		{"branch name with capitals", "options.branches[0].name", func(_ *Credentials, o *PgDogOptions, _ **shardmap.Record) {
			o.Branches = []Branch{{Name: "Staging", Backends: []shardmap.Backend{backend(0), backend(1)}}}
		}},
		{"branch name reserved", "options.branches[0].name", func(_ *Credentials, o *PgDogOptions, _ **shardmap.Record) {
			o.Branches = []Branch{{Name: "reshard_9", Backends: []shardmap.Backend{backend(0), backend(1)}}}
		}},
		{"branch name with __", "options.branches[0].name", func(_ *Credentials, o *PgDogOptions, _ **shardmap.Record) {
			o.Branches = []Branch{{Name: "a__b", Backends: []shardmap.Backend{backend(0), backend(1)}}}
		}},
		{"branch twice", "options.branches[1].name", func(_ *Credentials, o *PgDogOptions, _ **shardmap.Record) {
			b := Branch{Name: "dev", Backends: []shardmap.Backend{backend(0), backend(1)}}
			o.Branches = []Branch{b, b}
		}},
		{"branch backends count", "options.branches[0].backends", func(_ *Credentials, o *PgDogOptions, _ **shardmap.Record) {
			o.Branches = []Branch{{Name: "dev", Backends: []shardmap.Backend{backend(0)}}}
		}},
		{"branch backend host", "options.branches[0].backends[1].host", func(_ *Credentials, o *PgDogOptions, _ **shardmap.Record) {
			b := backend(1)
			b.Host = "has space"
			o.Branches = []Branch{{Name: "dev", Backends: []shardmap.Backend{backend(0), b}}}
		}},
		{"text list value PgDog reads as a uuid", "record.scheme.lists[1].values[0]", func(_ *Credentials, _ *PgDogOptions, r **shardmap.Record) {
			rec := listRecord()
			s := rec.Scheme.(shardmap.PgList)
			s.Lists[1].Values[0] = shardmap.Str("{67E55044-10B1-426F-9247-BB680E5FE0C8}")
			rec.Scheme = s
			*r = rec
		}},
		{"text range bound of the target PgDog reads as a uuid", "record.target.scheme.ranges[1].start", func(_ *Credentials, _ *PgDogOptions, r **shardmap.Record) {
			rec := reshardRecord()
			u := shardmap.Str("67e5504410b1426f9247bb680e5fe0c8")
			rec.Target.Scheme = shardmap.PgRange{Key: shardmap.Key{Column: "k", Type: shardmap.Text}, Ranges: []shardmap.RangeRule{
				{End: &u, Shard: 0}, {Start: &u, Shard: 1},
			}}
			*r = rec
		}},
		{"wrong router", "record.router.kind", func(_ *Credentials, _ *PgDogOptions, r **shardmap.Record) { *r = vitessRecord() }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cr := creds()
			opts := PgDogOptions{TLS: tlsOpts()}
			rec := hashRecord(2, false)
			c.run(&cr, &opts, &rec)
			_, err := PgDog(rec, cr, opts)
			require.ErrorIs(t, err, ErrInput)
			var ie *InputError
			require.ErrorAs(t, err, &ie)
			var fields []string
			var all *InputErrors
			require.ErrorAs(t, err, &all)
			for _, p := range all.Problems {
				fields = append(fields, p.Field)
			}
			require.Contains(t, fields, c.field, "error: %v", err)
			require.True(t, strings.HasPrefix(err.Error(), "render: "), err.Error())
			for _, s := range append(secrets(cr), "pw-bad-", "pw-nul") {
				require.NotContains(t, err.Error(), s, "an error message quotes a password")
			}
			_, err = ExpectedPools(rec, cr, opts)
			require.ErrorIs(t, err, ErrInput, "ExpectedPools must refuse what PgDog refuses")
		})
	}
}

// TestLooksLikeUUID pins the forms PgDog's config parser takes as a UUID, and near misses
// that stay text.
func TestLooksLikeUUID(t *testing.T) {
	for _, s := range []string{
		"67e55044-10b1-426f-9247-bb680e5fe0c8", "F9168C5E-CEB2-4faa-B6BF-329BF39FA1E4",
		"67e5504410b1426f9247bb680e5fe0c8", "{6d93bade-bd9f-4e13-8914-9474e1e3567b}",
		"urn:uuid:67e55044-10b1-426f-9247-bb680e5fe0c8", "URN:UUID:67e55044-10b1-426f-9247-bb680e5fe0c8",
		"00000000000000000000000000000000",
	} {
		require.True(t, looksLikeUUID(s), s)
	}
	for _, s := range []string{
		"", "eu", "67e55044-10b1-426f-9247-bb680e5fe0c", "67e5504410b1426f9247bb680e5fe0c8a",
		"67e55044x10b1-426f-9247-bb680e5fe0c8", "67e5504410b1426f9247bb680e5fe0g8",
		"{00000000000000000000000000000000", "67e55044-10b1-426f-9247bbb680e5fe0c8",
	} {
		require.False(t, looksLikeUUID(s), s)
	}
}

// TestRangeCatchAll: a range rule with neither bound is PgDog's default rule, so the
// record's Default, which it makes unreachable, is not rendered as a second default.
func TestRangeCatchAll(t *testing.T) {
	r := hashRecord(2, false)
	r.Scheme = shardmap.PgRange{Key: shardmap.Key{Column: "k", Type: shardmap.Text}, Ranges: []shardmap.RangeRule{{Shard: 1}}, Default: u32(0)}
	require.NoError(t, r.Validate())
	fs, err := PgDog(r, creds(), PgDogOptions{TLS: tlsOpts()})
	require.NoError(t, err)
	cfg, _ := parsePgDog(t, fs)
	require.Equal(t, []mappingTOML{{Shard: 1}}, cfg.ShardedTables[0].Mapping)
}

// TestTLSModes: Insecure leaves every TLS key to PgDog's defaults, and
// VerifyCA is rendered as verify_ca.
func TestTLSModes(t *testing.T) {
	c := creds()
	fs, err := PgDog(hashRecord(2, false), c, PgDogOptions{TLS: TLS{Insecure: true}})
	require.NoError(t, err)
	cfg, _ := parsePgDog(t, fs)
	for k := range cfg.General {
		require.False(t, strings.HasPrefix(k, "tls_"), k)
	}
	tls := tlsOpts()
	tls.ServerVerify = VerifyCA
	fs, err = PgDog(hashRecord(2, false), c, PgDogOptions{TLS: tls})
	require.NoError(t, err)
	cfg, _ = parsePgDog(t, fs)
	require.Equal(t, "verify_ca", cfg.General["tls_verify"])
}

// TestCheckoutTimeout: PgDogOptions.CheckoutTimeout is rendered as checkout_timeout in
// whole milliseconds, a key PgDog knows; zero leaves it out; a negative or sub-millisecond
// one is refused.
func TestCheckoutTimeout(t *testing.T) {
	c := creds()
	fs, err := PgDog(hashRecord(2, false), c, PgDogOptions{TLS: TLS{Insecure: true}, CheckoutTimeout: 750 * time.Millisecond})
	require.NoError(t, err)
	cfg, _ := parsePgDog(t, fs)
	require.EqualValues(t, 750, cfg.General["checkout_timeout"])
	require.Empty(t, checkKnownKeys(t, knownKeys(t), fs))
	fs, err = PgDog(hashRecord(2, false), c, PgDogOptions{TLS: TLS{Insecure: true}})
	require.NoError(t, err)
	cfg, _ = parsePgDog(t, fs)
	require.NotContains(t, cfg.General, "checkout_timeout")
	for _, d := range []time.Duration{-time.Second, time.Microsecond} {
		_, err = PgDog(hashRecord(2, false), c, PgDogOptions{TLS: TLS{Insecure: true}, CheckoutTimeout: d})
		var ie *InputError
		require.ErrorAs(t, err, &ie, "%v", d)
		require.Equal(t, "options.checkout_timeout", ie.Field, "%v", d)
	}
}

// TestSecretNeverPrints: a Secret shows as [secret] under every fmt verb, inside structs,
// and in JSON; a Credentials value can be logged.
func TestSecretNeverPrints(t *testing.T) {
	c := creds()
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10.3s"} {
		for _, v := range []any{c, c.Users[0], c.Admin.Password, &c} {
			out := fmt.Sprintf(verb, v)
			for _, s := range secrets(c) {
				require.NotContains(t, out, s, "verb %s", verb)
				require.NotContains(t, out, fmt.Sprintf("%x", s), "verb %s", verb)
			}
		}
	}
	require.Equal(t, "[secret]", fmt.Sprint(Secret("pw-x")))
	js, err := json.Marshal(c)
	require.NoError(t, err)
	for _, s := range secrets(c) {
		require.NotContains(t, string(js), s)
	}
	require.Contains(t, string(js), `"Password":"[secret]"`)
}
