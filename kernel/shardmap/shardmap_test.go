package shardmap_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"loam.dev/router/kernel/keyrange"
	sm "loam.dev/router/kernel/shardmap"
)

func backend(i int) sm.Backend {
	return sm.Backend{Host: fmt.Sprintf("10.0.0.%d", 10+i), Port: 5432, Database: "app"}
}

func pgHash(n int) *sm.Record {
	bs := make([]sm.Backend, n)
	for i := range bs {
		bs[i] = backend(i)
	}
	return sm.NewPgHash("app", sm.Key{Column: "customer_id", Type: sm.Bigint, Tables: []string{"orders"}}, bs...)
}

func vindex(t require.TestingT, n int) *sm.Record {
	bs := make([]sm.Backend, n)
	for i := range bs {
		bs[i] = sm.Backend{Host: fmt.Sprintf("10.1.0.%d", i), Port: 3306, Database: "vt_commerce", Tablet: fmt.Sprintf("zone1-%010d", 100+i)}
	}
	r, err := sm.NewVindex("commerce", sm.Key{Column: "id", Type: sm.Bigint}, sm.VindexHash, bs...)
	require.NoError(t, err)
	return r
}

func i64(v int64) *sm.Value { x := sm.Int(v); return &x }
func u32(v uint32) *uint32  { return &v }

func pgRange() *sm.Record {
	r := pgHash(3)
	r.Scheme = sm.PgRange{Key: sm.Key{Column: "id", Type: sm.Bigint}, Ranges: []sm.RangeRule{
		{End: i64(100), Shard: 0}, {Start: i64(100), End: i64(200), Shard: 1}, {Start: i64(200), Shard: 2},
	}}
	return r
}

func pgList() *sm.Record {
	r := pgHash(2)
	r.Scheme = sm.PgList{Key: sm.Key{Column: "region", Type: sm.Text}, Lists: []sm.ListRule{
		{Values: []sm.Value{sm.Str("eu"), sm.Str("uk")}, Shard: 0}, {Values: []sm.Value{sm.Str("us")}, Shard: 1},
	}, Default: u32(1)}
	return r
}

func TestValidRecords(t *testing.T) {
	for name, r := range map[string]*sm.Record{
		"pg_hash": pgHash(4), "vindex": vindex(t, 4), "pg_range": pgRange(), "pg_list": pgList(),
	} {
		require.NoError(t, r.Validate(), name)
	}
}

// Each mutation breaks one rule; Validate must name the field and say why.
func TestValidateNamesTheField(t *testing.T) {
	cases := []struct {
		name   string
		base   func() *sm.Record
		mutate func(r *sm.Record)
		field  string
		reason string
	}{
		{"generation zero", func() *sm.Record { return pgHash(2) }, func(r *sm.Record) { r.Generation = 0 }, "generation", "start at 1"},
		{"engine/router", func() *sm.Record { return pgHash(2) }, func(r *sm.Record) { r.Engine = sm.MySQL }, "router.kind", "cannot route"},
		{"upper-case pgdog name", func() *sm.Record { return pgHash(2) }, func(r *sm.Record) { r.Router.Name = "App" }, "router.name", "lowercases"},
		{"reserved __", func() *sm.Record { return pgHash(2) }, func(r *sm.Record) { r.Router.Name = "app__x" }, "router.name", "reserved"},
		{"hash count", func() *sm.Record { return pgHash(2) }, func(r *sm.Record) { r.Scheme = sm.PgHash{Key: r.Scheme.ShardKey(), Shards: 3} }, "scheme.shards", "must equal the shard count"},
		{"duplicate shard name", func() *sm.Record { return pgHash(3) }, func(r *sm.Record) { r.Shards[2].Name = "s0" }, "shards[2].name", "used twice"},
		{"no port", func() *sm.Record { return pgHash(2) }, func(r *sm.Record) { r.Shards[1].Backend.Port = 0 }, "shards[1].backend.port", "is 0"},
		{"host with a comma", func() *sm.Record { return pgHash(2) }, func(r *sm.Record) { r.Shards[1].Backend.Host = "db1,evil.example" }, "shards[1].backend.host", "libpq reads a comma"},
		{"host with a login", func() *sm.Record { return pgHash(2) }, func(r *sm.Record) { r.Shards[0].Backend.Host = "u@evil.example" }, "shards[0].backend.host", "DNS name or an IP literal"},
		{"replica host with a path", func() *sm.Record { return pgHash(2) }, func(r *sm.Record) {
			r.Shards[0].Backend.Replicas = []sm.Endpoint{{Host: "h/db?sslmode=disable", Port: 5432}}
		}, "shards[0].backend.replicas[0].host", "DNS name or an IP literal"},
		{"replica is primary", func() *sm.Record { return pgHash(2) }, func(r *sm.Record) {
			r.Shards[0].Backend.Replicas = []sm.Endpoint{{Host: r.Shards[0].Backend.Host, Port: 5432}}
		}, "shards[0].backend.replicas[0]", "primary itself"},
		{"no shards", func() *sm.Record { return pgHash(2) }, func(r *sm.Record) { r.Shards = nil; r.Scheme = sm.PgHash{Key: r.Scheme.ShardKey()} }, "shards", "at least one"},
		{"range gap", pgRange, func(r *sm.Record) { r.Scheme.(sm.PgRange).Ranges[1].Start = i64(150) }, "scheme.ranges[1]", "gap"},
		{"range overlap", pgRange, func(r *sm.Record) { r.Scheme.(sm.PgRange).Ranges[1].Start = i64(50) }, "scheme.ranges[1]", "overlaps"},
		{"range unsorted", pgRange, func(r *sm.Record) {
			s := r.Scheme.(sm.PgRange)
			s.Ranges[1], s.Ranges[2] = sm.RangeRule{Start: i64(200), End: i64(300), Shard: 2}, sm.RangeRule{Start: i64(100), Shard: 1}
		}, "scheme.ranges[2]", "out of order"},
		{"range not covering the top", pgRange, func(r *sm.Record) { r.Scheme.(sm.PgRange).Ranges[2].End = i64(300) }, "scheme.ranges[2].end", "in no shard"},
		{"range not covering the bottom", pgRange, func(r *sm.Record) { r.Scheme.(sm.PgRange).Ranges[0].Start = i64(-5) }, "scheme.ranges[0].start", "in no shard"},
		{"range empty", pgRange, func(r *sm.Record) { r.Scheme.(sm.PgRange).Ranges[1].End = i64(100) }, "scheme.ranges[1]", "not below end"},
		{"range shard index", pgRange, func(r *sm.Record) { r.Scheme.(sm.PgRange).Ranges[1].Shard = 7 }, "scheme.ranges[1].shard", "has 3 shards"},
		{"range text bound on bigint", pgRange, func(r *sm.Record) { v := sm.Str("x"); r.Scheme.(sm.PgRange).Ranges[1].End = &v }, "scheme.ranges[1].end", "is text but the key is bigint"},
		{"list value twice", pgList, func(r *sm.Record) { r.Scheme.(sm.PgList).Lists[1].Values[0] = sm.Str("uk") }, "scheme.lists[1].values[0]", "also in scheme.lists[0].values[1]"},
		{"list default index", pgList, func(r *sm.Record) { s := r.Scheme.(sm.PgList); s.Default = u32(2); r.Scheme = s }, "scheme.default", "has 2 shards"},
		{"list int on text", pgList, func(r *sm.Record) { r.Scheme.(sm.PgList).Lists[0].Values[0] = sm.Int(3) }, "scheme.lists[0].values[0]", "quote it"},
		{"vindex gap", func() *sm.Record { return vindex(t, 4) }, func(r *sm.Record) {
			r.Scheme.(sm.Vindex).Ranges[2] = keyrange.MustParse("90-c0")
			r.Shards[2].Name = "90-c0"
		}, "scheme.ranges[2]", "gap"},
		{"vindex name", func() *sm.Record { return vindex(t, 2) }, func(r *sm.Record) { r.Shards[1].Name = "s1" }, "shards[1].name", "must be its key range"},
		{"vindex count", func() *sm.Record { return vindex(t, 2) }, func(r *sm.Record) {
			s := r.Scheme.(sm.Vindex)
			s.Ranges = s.Ranges[:1]
			r.Scheme = s
		}, "scheme.ranges", "1 ranges for 2 shards"},
		{"hash vindex text", func() *sm.Record { return vindex(t, 2) }, func(r *sm.Record) {
			s := r.Scheme.(sm.Vindex)
			s.Key.Type = sm.Text
			r.Scheme = s
		}, "scheme.key.type", "takes integer keys"},
		{"pg scheme on vitess", func() *sm.Record { return vindex(t, 2) }, func(r *sm.Record) { r.Scheme = sm.PgHash{Key: sm.Key{Column: "id", Type: sm.Bigint}, Shards: 2} }, "scheme", "route PgDog databases"},
		{"target while serving", func() *sm.Record { return pgHash(2) }, func(r *sm.Record) { l := r.Layout.Clone(); r.Target = &l }, "target", "only while resharding"},
		{"resharding without target", func() *sm.Record { return pgHash(2) }, func(r *sm.Record) { r.State = sm.State{Phase: sm.Resharding, To: 2} }, "target", "is missing"},
		{"resharding to old gen", func() *sm.Record { return pgHash(2) }, func(r *sm.Record) {
			l := pgHash(4).Layout
			r.Target = &l
			r.State = sm.State{Phase: sm.Resharding, To: 1}
		}, "state.to", "must be above"},
		{"bad target", func() *sm.Record { return pgHash(2) }, func(r *sm.Record) {
			l := pgHash(4).Layout
			l.Shards[3].Backend.Host = ""
			r.Target = &l
			r.State = sm.State{Phase: sm.CuttingOver, To: 2, Step: sm.StepFence}
		}, "target.shards[3].backend.host", "host name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.base()
			c.mutate(r)
			err := r.Validate()
			require.ErrorIs(t, err, sm.ErrInvalid)
			var found bool
			var ve *sm.ValidationError
			require.ErrorAs(t, err, &ve)
			for _, p := range ve.Problems {
				if p.Field == c.field && strings.Contains(p.Reason, c.reason) {
					found = true
				}
			}
			require.True(t, found, "want %s: ...%s...; got:\n%v", c.field, c.reason, err)
		})
	}
}

// A host is a DNS name or an IP literal; anything a connection string reads as more (a
// list of hosts, a login, a path, parameters, a bracketed address, a port) is not.
func TestIsHost(t *testing.T) {
	for _, h := range []string{"db-1", "db-1.prod.example.com", "db.example.", "10.0.0.7", "127.0.0.1", "::1", "fe80::1", "2001:db8::8a2e:370:7334", "::ffff:10.0.0.1", "pg_shard_0", strings.Repeat("a", 63)} {
		require.True(t, sm.IsHost(h), "%q is a host", h)
	}
	for _, h := range []string{"", "db1,db2", "user@db", "db/x", "db?sslmode=disable", "[::1]", "db:5432", "db 1", "-db", "db-", "a..b", ".db", "1:2:3:4:5:6:7:8:9", "1::2::3", "fe80::1%eth0", "g::1", "::1.2.3", strings.Repeat("a", 64), "db\x00", "db'", "db\"", "db=x"} {
		require.False(t, sm.IsHost(h), "%q is not a host", h)
	}
}

func TestValidateNext(t *testing.T) {
	prev := pgHash(2)
	next := prev.Clone()
	next.Shards[0].Fence = sm.FenceWrites
	require.NoError(t, next.ValidateNext(prev), "a fence change is not a routing change")

	next = prev.Clone()
	next.Shards[1].Backend.Host = "10.9.9.9"
	require.ErrorContains(t, next.ValidateNext(prev), "generation: stays 1 although routing changes (shards[1].backend)")
	next.Generation = 2
	require.NoError(t, next.ValidateNext(prev))

	// The reshard target is rendered into the routers' files: adding or dropping it is a
	// routing change too.
	withTarget := prev.Clone()
	l := pgHash(4).Layout
	withTarget.Target, withTarget.State = &l, sm.State{Phase: sm.Resharding, To: 2}
	require.ErrorContains(t, withTarget.ValidateNext(prev), "routing changes (target added)")
	require.ErrorContains(t, prev.ValidateNext(withTarget), "routing changes (target removed)")
	fenced := withTarget.Clone()
	fenced.Target.Shards[0].Fence = sm.FenceWrites
	require.NoError(t, fenced.ValidateNext(withTarget), "fencing a target shard is not a routing change")

	back := prev.Clone()
	prev.Generation = 5
	require.ErrorContains(t, back.ValidateNext(prev), "goes backwards from 5 to 1")

	other := pgHash(2)
	other.Router.Name = "other"
	require.ErrorContains(t, other.ValidateNext(back), "belongs to one database")
}

func TestCloneIsDeep(t *testing.T) {
	for _, r := range []*sm.Record{pgHash(2), pgRange(), pgList(), vindex(t, 2)} {
		c := r.Clone()
		require.Equal(t, r, c)
		c.Shards[0].Name = "changed"
		switch s := c.Scheme.(type) {
		case sm.PgRange:
			*s.Ranges[0].End = sm.Int(-1)
		case sm.PgList:
			s.Lists[0].Values[0] = sm.Str("zz")
		case sm.Vindex:
			s.Ranges[0] = keyrange.MustParse("-40")
		case sm.PgHash:
			s.Key.Tables[0] = "x"
		}
		require.NoError(t, r.Validate(), "mutating a clone must not touch the original")
		require.NotEqual(t, r.Shards[0].Name, "changed")
	}
}

// genRecord draws any encodable record, valid or not: the codec must carry it exactly.
func genRecord() *rapid.Generator[*sm.Record] {
	str := rapid.StringN(0, 12, -1)
	optStrs := func(t *rapid.T, label string) []string {
		s := rapid.SliceOfN(str, 0, 3).Draw(t, label)
		if len(s) == 0 {
			return nil
		}
		return s
	}
	value := func(t *rapid.T) sm.Value {
		if rapid.Bool().Draw(t, "text") {
			return sm.Str(str.Draw(t, "s"))
		}
		return sm.Int(rapid.Int64().Draw(t, "i"))
	}
	optValue := func(t *rapid.T) *sm.Value {
		if rapid.Bool().Draw(t, "set") {
			v := value(t)
			return &v
		}
		return nil
	}
	optU32 := func(t *rapid.T) *uint32 {
		if rapid.Bool().Draw(t, "set") {
			v := rapid.Uint32().Draw(t, "u")
			return &v
		}
		return nil
	}
	key := func(t *rapid.T) sm.Key {
		return sm.Key{Column: str.Draw(t, "col"), Type: sm.KeyType(rapid.IntRange(0, 4).Draw(t, "type")), Tables: optStrs(t, "tables")}
	}
	scheme := func(t *rapid.T) sm.Scheme {
		switch rapid.IntRange(0, 4).Draw(t, "scheme") {
		case 1:
			return sm.PgHash{Key: key(t), Shards: rapid.Uint32().Draw(t, "n")}
		case 2:
			s := sm.PgRange{Key: key(t), Default: optU32(t)}
			for range rapid.IntRange(0, 4).Draw(t, "nr") {
				s.Ranges = append(s.Ranges, sm.RangeRule{Start: optValue(t), End: optValue(t), Shard: rapid.Uint32().Draw(t, "shard")})
			}
			return s
		case 3:
			s := sm.PgList{Key: key(t), Default: optU32(t)}
			for range rapid.IntRange(0, 4).Draw(t, "nl") {
				l := sm.ListRule{Shard: rapid.Uint32().Draw(t, "shard")}
				for range rapid.IntRange(0, 3).Draw(t, "nv") {
					l.Values = append(l.Values, value(t))
				}
				s.Lists = append(s.Lists, l)
			}
			return s
		case 4:
			s := sm.Vindex{Key: key(t), Kind: sm.VindexKind(rapid.IntRange(0, 2).Draw(t, "vk"))}
			if n := rapid.IntRange(0, 8).Draw(t, "nk"); n > 0 {
				s.Ranges, _ = keyrange.Split(keyrange.Full(), n)
			}
			return s
		}
		return nil
	}
	layout := func(t *rapid.T) sm.Layout {
		l := sm.Layout{Scheme: scheme(t)}
		for range rapid.IntRange(0, 5).Draw(t, "shards") {
			b := sm.Backend{Host: str.Draw(t, "host"), Port: rapid.Uint16().Draw(t, "port"), Database: str.Draw(t, "db"), Tablet: str.Draw(t, "tablet")}
			for range rapid.IntRange(0, 2).Draw(t, "replicas") {
				b.Replicas = append(b.Replicas, sm.Endpoint{Host: str.Draw(t, "rh"), Port: rapid.Uint16().Draw(t, "rp")})
			}
			l.Shards = append(l.Shards, sm.Shard{Name: str.Draw(t, "name"), Backend: b, Fence: sm.Fence(rapid.IntRange(0, 2).Draw(t, "fence"))})
		}
		return l
	}
	return rapid.Custom(func(t *rapid.T) *sm.Record {
		r := &sm.Record{
			Version: rapid.Uint64().Draw(t, "version"), Generation: rapid.Uint64().Draw(t, "gen"),
			Engine: sm.Engine(rapid.IntRange(0, 2).Draw(t, "engine")),
			Router: sm.Router{Kind: sm.RouterKind(rapid.IntRange(0, 2).Draw(t, "rk")), Name: str.Draw(t, "rn")},
			Layout: layout(t),
			State:  sm.State{Phase: sm.Phase(rapid.IntRange(0, 4).Draw(t, "phase")), To: rapid.Uint64().Draw(t, "to"), Step: sm.CutoverStep(rapid.IntRange(0, 7).Draw(t, "step"))},
		}
		if rapid.Bool().Draw(t, "target") {
			l := layout(t)
			r.Target = &l
		}
		return r
	})
}

// decode(encode(r)) == r, and the encoding depends on r alone (deterministic).
func TestBinaryRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := genRecord().Draw(t, "record")
		b, err := r.MarshalBinary()
		require.NoError(t, err)
		b2, err := r.Clone().MarshalBinary()
		require.NoError(t, err)
		require.Equal(t, b, b2, "encoding must be deterministic")
		got, err := sm.Decode(b)
		require.NoError(t, err)
		require.Equal(t, r, got)
	})
}

func TestJSONRoundTrip(t *testing.T) {
	for _, r := range []*sm.Record{pgHash(3), pgRange(), pgList(), vindex(t, 4)} {
		b, err := json.Marshal(r)
		require.NoError(t, err)
		var got sm.Record
		require.NoError(t, json.Unmarshal(b, &got), "%s", b)
		require.Equal(t, r, &got, "%s", b)
	}
	cut := pgHash(2)
	l := pgHash(4).Layout
	cut.Target, cut.State = &l, sm.State{Phase: sm.CuttingOver, To: 2, Step: sm.StepPublish}
	b, err := json.Marshal(cut)
	require.NoError(t, err)
	var got sm.Record
	require.NoError(t, json.Unmarshal(b, &got))
	require.Equal(t, cut, &got)
}

func TestJSONErrorsNameTheField(t *testing.T) {
	good, _ := json.Marshal(pgHash(2))
	for bad, want := range map[string]string{
		strings.Replace(string(good), `"fence":"open"`, `"fence":"shut"`, 1):      `shards[0].fence: unknown shards[0].fence "shut"`,
		strings.Replace(string(good), `"engine":"postgres"`, `"engine":"pg"`, 1):  `engine: unknown engine "pg"`,
		strings.Replace(string(good), `"kind":"pg_hash"`, `"kind":"pg_hashh"`, 1): `scheme.kind: unknown scheme kind`,
		strings.Replace(string(good), `"shards":2`, `"shards":2,"lists":[]`, 1):   `scheme.lists: is not a field of a pg_hash scheme`,
		strings.Replace(string(good), `"version"`, `"versoin"`, 1):                `unknown field "versoin"`,
	} {
		var r sm.Record
		err := json.Unmarshal([]byte(bad), &r)
		require.ErrorIs(t, err, sm.ErrJSON)
		require.ErrorContains(t, err, want)
	}
}

func TestDecodeRefusesUnknownFormatAndTruncation(t *testing.T) {
	b, err := vindex(t, 8).MarshalBinary()
	require.NoError(t, err)
	bad := append([]byte{2}, b[1:]...)
	_, err = sm.Decode(bad)
	require.ErrorIs(t, err, sm.ErrEncoding)
	require.ErrorContains(t, err, "unknown format byte 0x02")
	for i := range len(b) {
		_, err := sm.Decode(b[:i])
		require.ErrorIs(t, err, sm.ErrEncoding, "prefix of %d bytes", i)
	}
	_, err = sm.Decode(append(b, 0))
	require.ErrorContains(t, err, "trailing")
}

func FuzzDecode(f *testing.F) {
	for _, r := range []*sm.Record{pgHash(2), pgRange(), pgList()} {
		b, _ := r.MarshalBinary()
		f.Add(b)
	}
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := sm.Decode(data)
		if err != nil {
			if !errors.Is(err, sm.ErrEncoding) {
				t.Fatalf("error does not wrap ErrEncoding: %v", err)
			}
			return
		}
		b, err := r.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded record does not encode: %v", err)
		}
		r2, err := sm.Decode(b)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		b2, _ := r2.MarshalBinary()
		if !bytes.Equal(b, b2) {
			t.Fatal("encoding of a decoded record is not stable")
		}
		_ = r.Validate() // must not panic on any decoded record
	})
}

func FuzzUnmarshalJSON(f *testing.F) {
	for _, r := range []*sm.Record{pgHash(2), pgRange(), pgList()} {
		b, _ := json.Marshal(r)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r sm.Record
		if err := json.Unmarshal(data, &r); err != nil {
			return
		}
		_ = r.Validate()
		if _, err := r.MarshalBinary(); err != nil {
			t.Fatalf("a record read from JSON must encode: %v", err)
		}
	})
}

func BenchmarkEncode256(b *testing.B) {
	r := pgHash(256)
	r.Version = 1 << 20
	data, err := r.MarshalBinary()
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		_, _ = r.MarshalBinary()
	}
	b.ReportMetric(float64(len(data)), "bytes/record")
}

func BenchmarkDecode256(b *testing.B) {
	data, _ := pgHash(256).MarshalBinary()
	b.ReportAllocs()
	for b.Loop() {
		_, _ = sm.Decode(data)
	}
}

func BenchmarkValidate256(b *testing.B) {
	r := pgHash(256)
	b.ReportAllocs()
	for b.Loop() {
		_ = r.Validate()
	}
}

func TestDecodeErrorNamesTheField(t *testing.T) {
	r := pgHash(4)
	l := pgHash(3).Layout
	r.Target, r.State = &l, sm.State{Phase: sm.Resharding, To: 2}
	b, err := r.MarshalBinary()
	require.NoError(t, err)
	// Cut inside the target's last shard name: the error names target.shards[2].
	i := bytes.LastIndex(b, []byte("s2"))
	_, err = sm.Decode(b[:i+1])
	require.ErrorContains(t, err, "(target.shards[2].name)")
}
