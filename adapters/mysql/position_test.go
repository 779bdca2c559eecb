package mysql_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	mysqlad "loam.dev/router/adapters/mysql"
)

const (
	uuidA = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	uuidB = "4f22fb58-82db-22f2-af44-d91bba53a673"
)

func TestParsePosition(t *testing.T) {
	ok := []struct{ in, canonical string }{
		{"", ""},
		{"  \n", ""},
		{"0-1-14", "0-1-14"},
		{"1-2-7,0-1-14", "0-1-14,1-2-7"},
		{"0-1-14, 1-2-7", "0-1-14,1-2-7"},
		{"4294967295-4294967295-18446744073709551615", "4294967295-4294967295-18446744073709551615"},
		{uuidA + ":1-5", uuidA + ":1-5"},
		{strings.ToUpper(uuidA) + ":7:1-5", uuidA + ":1-5:7"},
		{uuidA + ":6:7:1-5", uuidA + ":1-7"},
		{uuidA + ":1-3:5:4", uuidA + ":1-5"},
		{uuidA + ":1-5:7-9,\n" + uuidB + ":1", uuidA + ":1-5:7-9," + uuidB + ":1"},
		{uuidB + ":3," + uuidA + ":2", uuidA + ":2," + uuidB + ":3"},
		{uuidA + ":1-5:job:1-3:Other_1:9", uuidA + ":1-5:job:1-3:other_1:9"},
		{uuidA + ":1," + uuidA + ":2", uuidA + ":1-2"},
	}
	for _, c := range ok {
		p, err := mysqlad.ParsePosition(c.in)
		require.NoError(t, err, "%q", c.in)
		require.Equal(t, c.canonical, p.String(), "%q", c.in)
	}
	bad := []string{
		"0-1", "0-1-2-3", "a-1-2", "0-1-", "-0-1-2", "0-+1-2", "0-1-2,0-2-3", "0-1-2,,1-1-1", "4294967296-1-1",
		uuidA, uuidA + ":", uuidA + ":0", uuidA + ":5-3", uuidA + ":1-", uuidA + ":job", uuidA + ":1:9job:2",
		"3e11fa47-71ca-11e1-9e33-c80aa942956:1", "3e11fa47x71ca-11e1-9e33-c80aa9429562:1", uuidA + ":1,0-1-2", "0-1-2," + uuidA + ":1",
		uuidA + ":" + strings.Repeat("t", 33) + ":1",
	}
	for _, in := range bad {
		_, err := mysqlad.ParsePosition(in)
		require.Error(t, err, "%q", in)
	}
}

func TestComparePositions(t *testing.T) {
	cases := []struct {
		a, b string
		want int
		err  string
	}{
		{"", "", 0, ""},
		{"", "0-1-1", -1, ""},
		{uuidA + ":1", "", 1, ""},
		{"0-1-5", "0-1-5", 0, ""},
		{"0-1-5", "0-1-6", -1, ""},
		{"0-1-5,1-1-2", "0-1-5", 1, ""},
		{"0-2-9", "0-1-5", 1, ""}, // a later seqno from a new primary: ahead
		{"0-1-5,1-1-9", "0-1-6,1-1-2", 0, "not ordered"},
		{"0-1-5", "0-2-5", 0, "diverge"},
		{uuidA + ":1-10", uuidA + ":1-5:7", 1, ""},
		{uuidA + ":1-5", uuidA + ":1-6", -1, ""},
		{uuidA + ":1-5:7", uuidA + ":1-6", 0, "not ordered"},
		{uuidA + ":1-5", uuidA + ":1-5," + uuidB + ":1", -1, ""},
		{uuidA + ":1-5:t:1", uuidA + ":1-5", 1, ""},
		{uuidA + ":1-5", uuidA + ":t:1-5", 0, "not ordered"},
		{"0-1-5", uuidA + ":1", 0, "cannot compare"},
	}
	for _, c := range cases {
		got, err := mysqlad.ComparePositions(c.a, c.b)
		if c.err != "" {
			require.ErrorContains(t, err, c.err, "%s vs %s", c.a, c.b)
			continue
		}
		require.NoError(t, err, "%s vs %s", c.a, c.b)
		require.Equal(t, c.want, got, "%s vs %s", c.a, c.b)
		back, err := mysqlad.ComparePositions(c.b, c.a)
		require.NoError(t, err)
		require.Equal(t, -c.want, back, "antisymmetric: %s vs %s", c.b, c.a)
	}
	_, err := mysqlad.ComparePositions("0-1", "")
	require.Error(t, err)
}

// genMySQL draws a MySQL GTID set over two sources and a tag, small enough to collide.
func genMySQL(t *rapid.T, label string) string {
	var elems []string
	for _, src := range []string{uuidA, uuidA + ":tg", uuidB} {
		n := rapid.IntRange(0, 3).Draw(t, label+" intervals of "+src)
		for range n {
			lo := rapid.Uint64Range(1, 20).Draw(t, label+" lo")
			hi := lo + rapid.Uint64Range(0, 5).Draw(t, label+" len")
			elems = append(elems, fmt.Sprintf("%s:%d-%d", src, lo, hi))
		}
	}
	return strings.Join(elems, ",")
}

// members lists the transactions of a set, for a brute-force check of containment.
func members(t *rapid.T, s string) map[string]bool {
	out := map[string]bool{}
	p, err := mysqlad.ParsePosition(s)
	if err != nil {
		t.Fatalf("%v", err)
	}
	for _, e := range strings.Split(p.String(), ",") {
		if e == "" {
			continue
		}
		parts := strings.Split(e, ":")
		tag := ""
		for _, part := range parts[1:] {
			if part[0] > '9' {
				tag = part
				continue
			}
			var lo, hi uint64
			if _, err := fmt.Sscanf(part, "%d-%d", &lo, &hi); err != nil {
				fmt.Sscanf(part, "%d", &lo)
				hi = lo
			}
			for n := lo; n <= hi; n++ {
				out[fmt.Sprintf("%s/%s/%d", parts[0], tag, n)] = true
			}
		}
	}
	return out
}

func subset(a, b map[string]bool) bool {
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// TestPropMySQLSetsOrderByContainment: Compare agrees with set containment computed by brute
// force, Merge is the union, and String is canonical (equal sets print alike).
func TestPropMySQLSetsOrderByContainment(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := genMySQL(t, "a"), genMySQL(t, "b")
		ma, mb := members(t, a), members(t, b)
		got, err := mysqlad.ComparePositions(a, b)
		switch ab, ba := subset(mb, ma), subset(ma, mb); {
		case ab && ba:
			require.NoError(t, err)
			require.Equal(t, 0, got)
			pa, _ := mysqlad.ParsePosition(a)
			pb, _ := mysqlad.ParsePosition(b)
			require.Equal(t, pa.String(), pb.String(), "equal sets print alike")
		case ab:
			require.NoError(t, err)
			require.Equal(t, 1, got)
		case ba:
			require.NoError(t, err)
			require.Equal(t, -1, got)
		default:
			require.Error(t, err)
		}
		pa, _ := mysqlad.ParsePosition(a)
		pb, _ := mysqlad.ParsePosition(b)
		u, err := pa.Merge(pb)
		require.NoError(t, err)
		mu := members(t, u.String())
		require.True(t, subset(ma, mu) && subset(mb, mu), "the merge holds both")
		for k := range mu {
			require.True(t, ma[k] || mb[k], "the merge holds nothing else: %s", k)
		}
	})
}

// TestPropMariaDBPositions: Compare orders per domain and Merge takes the higher seqno.
func TestPropMariaDBPositions(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		gen := func(label string) map[int]uint64 {
			m := map[int]uint64{}
			for d := range 3 {
				if rapid.Bool().Draw(t, fmt.Sprintf("%s has domain %d", label, d)) {
					m[d] = rapid.Uint64Range(1, 6).Draw(t, fmt.Sprintf("%s seq %d", label, d))
				}
			}
			return m
		}
		format := func(m map[int]uint64) string {
			var parts []string
			for d, seq := range m {
				parts = append(parts, fmt.Sprintf("%d-%d-%d", d, 1, seq))
			}
			return strings.Join(parts, ",")
		}
		ma, mb := gen("a"), gen("b")
		geq := func(x, y map[int]uint64) bool {
			for d, s := range y {
				if x[d] < s {
					return false
				}
			}
			return true
		}
		got, err := mysqlad.ComparePositions(format(ma), format(mb))
		switch ab, ba := geq(ma, mb), geq(mb, ma); {
		case ab && ba:
			require.Equal(t, 0, got)
		case ab:
			require.Equal(t, 1, got)
		case ba:
			require.Equal(t, -1, got)
		default:
			require.Error(t, err)
			return
		}
		require.NoError(t, err)
		pa, _ := mysqlad.ParsePosition(format(ma))
		pb, _ := mysqlad.ParsePosition(format(mb))
		m, err := pa.Merge(pb)
		require.NoError(t, err)
		ca, _ := m.Compare(pa)
		cb, _ := m.Compare(pb)
		require.GreaterOrEqual(t, ca, 0)
		require.GreaterOrEqual(t, cb, 0)
	})
}

// FuzzParsePosition: a position that parses prints canonically, parses back to the same
// position, and equals itself.
func FuzzParsePosition(f *testing.F) {
	for _, s := range []string{"", "0-1-14", "0-1-14,1-2-7", uuidA + ":1-5:7-9,\n" + uuidB + ":1", uuidA + ":1-5:job:1-3", "0-1", uuidA + ":0", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := mysqlad.ParsePosition(s)
		if err != nil {
			return
		}
		q, err := mysqlad.ParsePosition(p.String())
		require.NoError(t, err, "%q printed as %q", s, p.String())
		require.Equal(t, p.String(), q.String())
		c, err := p.Compare(q)
		require.NoError(t, err)
		require.Zero(t, c)
		m, err := p.Merge(q)
		require.NoError(t, err)
		require.Equal(t, p.String(), m.String(), "merging a position with itself changes nothing")
	})
}
