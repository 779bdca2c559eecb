package merge

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"loam.dev/router/proof/oracle"
)

// The differential test against the proved oracle (proof/, issue 19): the same random request
// lines go to this package and to the OCaml program extracted from the Coq model, and the
// answers must agree as the protocol defines it (oracle.Agree). make proof builds the oracle;
// without it these tests skip, or fail under LOAM_REQUIRE_REAL=1.

var long = flag.Bool("long", false, "run the differential test against the proved oracle at nightly size (100,000 requests)")

// oracleCases is the number of requests of the differential test.
func oracleCases() int {
	if *long {
		return 100_000
	}
	return 10_000
}

// diffGen makes random request lines: every op, every aggregate, NULLs, ties, big and small
// decimals, text whose order is byte order, and refused requests of every kind.
type diffGen struct{ r *rand.Rand }

// byteOrderTexts sort differently under COLLATE "C" than under a linguistic collation.
var byteOrderTexts = []string{"", "a", "A", "b", "B", "ab", "a b", "Z", "é", "É", "e\u0301", "日本", "\x7f", "~", "10", "9", "a\u00e9", "\u0001", "\"q\"", `\`, "\n", "😀"}

func (g diffGen) n(k int) int { return g.r.IntN(k) }

func (g diffGen) decimal() Value {
	coef := big.NewInt(int64(g.n(2001) - 1000))
	switch g.n(8) {
	case 0:
		coef.Add(coef, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(19+g.n(20))), nil))
	case 1:
		coef.Neg(coef.Add(coef, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(19+g.n(20))), nil)))
	}
	scale := int32(g.n(4))
	// The long ones are rare: the oracle's binary integers make them slow.
	switch r := g.n(400); {
	case r < 40:
		scale = int32(10 + g.n(30)) // tiny numbers: AVG's scale follows them
	case r == 40:
		scale = int32(995 + g.n(15)) // around AVG's cap of 1000 decimals
	case r == 41:
		coef.Mul(coef, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(g.n(300))), nil)) // long coefficients
	}
	v, _ := Decimal(coef, scale)
	return v
}

func (g diffGen) integer() Value {
	switch g.n(12) {
	case 0:
		return Int([]int64{math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1}[g.n(4)])
	case 1:
		return Int(g.r.Int64())
	}
	return Int(int64(g.n(9) - 4)) // small: many ties
}

// value draws a value of a column kind: 0 int, 1 decimal, 2 numbers mixed, 3 text, 4 bool,
// 5 anything (mixed classes, which SQL never has but the order is defined for).
func (g diffGen) value(kind int) Value {
	if g.n(5) == 0 {
		return Null()
	}
	switch kind {
	case 0:
		return g.integer()
	case 1:
		return g.decimal()
	case 2:
		if g.n(2) == 0 {
			return g.integer()
		}
		return g.decimal()
	case 3:
		return Text(byteOrderTexts[g.n(len(byteOrderTexts))])
	case 4:
		return Bool(g.n(2) == 0)
	}
	return g.value(g.n(5))
}

func (g diffGen) kinds(n int, numeric bool) []int {
	ks := make([]int, n)
	for i := range ks {
		switch {
		case numeric && g.n(6) != 0:
			ks[i] = g.n(3)
		case g.n(12) == 0:
			ks[i] = 5
		default:
			ks[i] = g.n(5)
		}
	}
	return ks
}

func (g diffGen) rows(kinds []int, maxRows int) []Row {
	rows := make([]Row, g.n(maxRows+1))
	for i := range rows {
		row := make(Row, len(kinds))
		for c, k := range kinds {
			row[c] = g.value(k)
		}
		if g.n(400) == 0 && len(row) > 0 { // a short row
			row = row[:g.n(len(row))]
		}
		rows[i] = row
	}
	return rows
}

func (g diffGen) shards(kinds []int, maxShards, maxRows int) [][]Row {
	ss := make([][]Row, g.n(maxShards+1))
	for i := range ss {
		ss[i] = g.rows(kinds, maxRows)
	}
	return ss
}

func (g diffGen) limit() int64 {
	switch g.n(10) {
	case 0:
		return math.MaxInt64
	case 1:
		return math.MaxInt64 - int64(g.n(3))
	}
	return int64(g.n(12))
}

func (g diffGen) merge() *MergeRequest {
	kinds := g.kinds(1+g.n(4), false)
	req := &MergeRequest{Limit: Limit{Count: All}}
	for range g.n(4) {
		req.Order = append(req.Order, Key{Col: g.n(len(kinds) + 1), Desc: g.n(2) == 0, Nulls: Nulls(g.n(3))})
	}
	if g.n(4) != 0 {
		req.Limit.Count = g.limit()
	}
	if g.n(2) == 0 {
		req.Limit.Offset = g.limit()
	}
	req.Shards = g.shards(kinds, 5, 8)
	w, _ := req.Order.width()
	for _, s := range req.Shards {
		wide := true
		for _, r := range s {
			wide = wide && len(r) >= w
		}
		if wide && g.n(12) != 0 { // mostly sorted, as shards are; else unsorted
			slices.SortStableFunc(s, req.Order.Compare)
		}
	}
	return req
}

func (g diffGen) aggregation(ncols int) Aggregation {
	var a Aggregation
	for range g.n(3) {
		a.GroupBy = append(a.GroupBy, g.n(ncols))
	}
	for range 1 + g.n(4) {
		ag := Agg{Func: Func(1 + g.n(6)), Col: g.n(ncols)}
		if g.n(30) == 0 {
			ag.Col = ncols + g.n(2) // a column the rows lack
		}
		if ag.Func == CountStar {
			ag.Col = 0
		} else if g.n(25) == 0 {
			ag.Distinct = true
		}
		a.Aggs = append(a.Aggs, ag)
	}
	return a
}

func (g diffGen) aggregate() *AggregateRequest {
	kinds := g.kinds(1+g.n(4), true)
	req := &AggregateRequest{Aggregation: g.aggregation(len(kinds)), Input: InputRows}
	raw := g.shards(kinds, 4, 10)
	if g.n(3) != 0 {
		req.Shards = raw
		return req
	}
	// Partials, as a shard would return them, sometimes corrupted.
	req.Input = InputPartials
	p, err := Decompose(req.Aggregation)
	if err != nil {
		req.Shards = raw
		return req
	}
	for _, rows := range raw {
		part, err := p.ShardRows(rows)
		if err != nil {
			continue
		}
		req.Shards = append(req.Shards, part)
	}
	if g.n(4) == 0 && len(req.Shards) > 0 && len(req.Shards[0]) > 0 && len(p.Partials) > 0 {
		row := req.Shards[0][0]
		j := len(p.GroupBy) + g.n(len(p.Partials))
		switch g.n(6) {
		case 0:
			row[j] = Int(-1)
		case 1:
			row[j] = g.decimal()
		case 2:
			req.Shards[0][0] = row[:len(row)-1]
		case 3:
			row[j] = Null()
		case 4:
			row[j] = Int(math.MaxInt64)
		default:
			row[j] = Text("x")
		}
	}
	return req
}

func (g diffGen) bigInt(max int) *big.Int {
	x := big.NewInt(int64(g.n(max)))
	if g.n(10) == 0 {
		x.Add(x, new(big.Int).Lsh(big.NewInt(1), 64))
	}
	if g.n(10) == 0 {
		x.Neg(x)
	}
	return x
}

func (g diffGen) partition() *PartitionRequest {
	nparts := 1 + g.n(4)
	if g.n(2) == 0 {
		m := 1 + g.n(8)
		rs := make([][]*big.Int, nparts)
		for r := range m {
			if g.n(15) == 0 {
				continue // a gap
			}
			i := g.n(nparts)
			rs[i] = append(rs[i], big.NewInt(int64(r)))
			if g.n(15) == 0 {
				rs[g.n(nparts)] = append(rs[g.n(nparts)], big.NewInt(int64(r))) // twice
			}
		}
		if g.n(10) == 0 {
			rs[g.n(nparts)] = append(rs[g.n(nparts)], g.bigInt(12)) // maybe outside [0, m)
		}
		return &PartitionRequest{Modulus: big.NewInt(int64(m)), Remainders: rs}
	}
	lo := g.bigInt(50)
	cuts := []*big.Int{lo}
	for range 1 + g.n(6) {
		cuts = append(cuts, new(big.Int).Add(cuts[len(cuts)-1], big.NewInt(int64(1+g.n(20)))))
	}
	space := Span{Lo: lo, Hi: cuts[len(cuts)-1]}
	parts := make([][]Span, nparts)
	for k := 0; k+1 < len(cuts); k++ {
		s := Span{Lo: cuts[k], Hi: cuts[k+1]}
		switch g.n(14) {
		case 0:
			continue // a gap
		case 1:
			s.Hi = new(big.Int).Add(s.Hi, big.NewInt(int64(1+g.n(3)))) // an overlap, or past the space
		case 2:
			s.Lo = new(big.Int).Sub(s.Lo, big.NewInt(int64(1+g.n(3))))
		}
		i := g.n(nparts)
		parts[i] = append(parts[i], s)
	}
	return &PartitionRequest{Space: space, Parts: parts}
}

// malformed breaks a well-formed line in one of the ways the protocol refuses.
func (g diffGen) malformed(line string) string {
	line = strings.TrimSuffix(line, "\n")
	body := strings.TrimSuffix(line, "}")
	switch g.n(16) {
	case 0:
		return body + `,"extra":1}`
	case 1:
		return line[:1+g.n(len(line)-1)]
	case 2:
		return strings.Replace(line, `"op":"`, `"op":"x`, 1)
	case 3:
		return strings.Replace(line, `"asc"`, `"up"`, 1)
	case 4:
		return strings.Replace(line, `"col":`, `"col":-`, 1)
	case 5:
		return strings.Replace(line, `"fn":"avg"`, []string{`"fn":"string_agg"`, `"fn":"median"`, `"fn":"stddev"`}[g.n(3)], 1)
	case 6:
		return strings.Replace(line, `"fn":"sum","col":`, `"fn":"sum","xcol":`, 1)
	case 7:
		return strings.Replace(line, `{"fn":"count"}`, `{"fn":"count","distinct":true}`, 1)
	case 8:
		return strings.Replace(line, `"limit":`, `"limit":1e`, 1)
	case 9:
		return strings.Replace(line, `"offset":`, `"offset":-`, 1)
	case 10:
		return strings.Replace(line, `],[`, `],[1e3,`, 1)
	case 11:
		return body + `,"op":"merge"}`
	case 12:
		return strings.Replace(line, `"shards":[`, `"shards":[[1],`, 1)
	case 13:
		return strings.Replace(line, `"modulus":`, `"modulus":-`, 1)
	case 14:
		return strings.Replace(line, `"distinct":true`, `"distinct":1`, 1)
	}
	return strings.Replace(line, `"parts":[[[`, `"parts":[[[5,5],[`, 1)
}

// line draws one request line.
func (g diffGen) line() []byte {
	var req Request
	switch g.n(3) {
	case 0:
		req = g.merge()
	case 1:
		req = g.aggregate()
	default:
		req = g.partition()
	}
	line := AppendRequest(nil, req)
	if g.n(12) == 0 {
		return []byte(g.malformed(string(line)))
	}
	return bytes.TrimSuffix(line, []byte("\n"))
}

// respondMutant is Respond with a deliberate bug planted (mut 0: none).
func respondMutant(line []byte, mut mutation) []byte {
	if mut == 0 {
		return Respond(nil, line)
	}
	req, err := DecodeRequest(line)
	if err != nil {
		return Respond(nil, line)
	}
	return respond(nil, req, mut)
}

// differences feeds n lines of seed to this package (with mut planted) and to the oracle and
// returns the first disagreement, or "".
func differences(t *testing.T, o *oracle.Oracle, seed uint64, n int, mut mutation) (string, map[string]int) {
	t.Helper()
	g := diffGen{rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	kinds := map[string]int{}
	for i := range n {
		line := g.line()
		goAns := bytes.TrimSuffix(respondMutant(line, mut), []byte("\n"))
		oAns, err := o.Ask(line)
		if err != nil {
			t.Fatalf("case %d of seed %d: %v\nrequest: %s", i, seed, err, line)
		}
		kinds[verdictOf(goAns)]++
		if !oracle.Agree(goAns, oAns) {
			return fmt.Sprintf("case %d of seed %d:\nrequest: %s\nkernel/merge: %s\noracle:       %s", i, seed, line, goAns, oAns), kinds
		}
	}
	return "", kinds
}

func verdictOf(resp []byte) string {
	s := string(resp)
	if strings.HasPrefix(s, `{"ok":true`) {
		if strings.Contains(s, `"partition":`) {
			return "ok partition_check"
		}
		if strings.Contains(s, `"partials":`) {
			return "ok aggregate"
		}
		return "ok merge"
	}
	if k := strings.Index(s, `"kind":"`); k >= 0 {
		rest := s[k+8:]
		return rest[:strings.IndexByte(rest, '"')]
	}
	return "?"
}

// TestMatchesProvedOracle is the differential test: kernel/merge and the proved oracle
// agree on every request (10,000; 100,000 with -long).
func TestMatchesProvedOracle(t *testing.T) {
	o := oracle.Require(t)
	n := oracleCases()
	start := time.Now()
	diff, kinds := differences(t, o, 19, n, 0)
	if diff != "" {
		t.Fatal(diff)
	}
	t.Logf("%d requests agree in %v; answers by kind: %v", n, time.Since(start).Round(time.Millisecond), kinds)
	for _, k := range []string{"ok merge", "ok aggregate", "ok partition_check", KindBadRequest, KindNotDecomposable, KindBadData, KindUnsorted} {
		if kinds[k] < n/200 {
			t.Errorf("only %d of %d answers are %q: the generator no longer reaches it", kinds[k], n, k)
		}
	}
}

// A difference planted on either side is caught: each of kernel/merge's mutants, and each of
// the oracle's (--mutant=...).
func TestProvedOracleCatchesMutants(t *testing.T) {
	o := oracle.Require(t)
	for _, m := range []struct {
		name string
		mut  mutation
	}{
		{"tie-high-shard-first", mutTieHighShardFirst},
		{"per-shard-limit-ignores-offset", mutPerShardLimitIgnoresOffset},
		{"unchecked-tail", mutUncheckedTail},
		{"avg-of-averages", mutAvgOfAverages},
		{"closed-ranges", mutClosedRanges},
	} {
		diff, _ := differences(t, o, 7, 5000, m.mut)
		if diff == "" {
			t.Errorf("kernel/merge mutant %s: no difference from the proved oracle in 5000 requests", m.name)
		} else {
			t.Logf("kernel/merge mutant %s caught: %s", m.name, strings.SplitN(diff, "\n", 2)[0])
		}
	}
	for _, name := range []string{"tie", "shard-limit", "avg-round"} {
		mo := oracle.Require(t, "--mutant="+name)
		diff, _ := differences(t, mo, 7, 5000, 0)
		if diff == "" {
			t.Errorf("oracle mutant %s: no difference from kernel/merge in 5000 requests", name)
		} else {
			t.Logf("oracle mutant %s caught: %s", name, strings.SplitN(diff, "\n", 2)[0])
		}
	}
}

// FuzzMatchesProvedOracle feeds any line to both sides: the oracle must answer every line
// with one response and, wherever kernel/merge accepts the request, agree with it (where
// kernel/merge refuses the line, the oracle's JSON reader may accept more, see proof/README.md).
func FuzzMatchesProvedOracle(f *testing.F) {
	for _, l := range docJSONLines(f) {
		if strings.HasPrefix(l, `{"op"`) {
			f.Add([]byte(l))
		}
	}
	g := diffGen{rand.New(rand.NewPCG(1, 2))}
	for range 20 {
		f.Add(g.line())
	}
	o := oracle.Require(f)
	f.Fuzz(func(t *testing.T, line []byte) {
		if len(bytes.TrimSpace(line)) == 0 || bytes.ContainsAny(line, "\n\r") {
			return
		}
		goAns := bytes.TrimSuffix(Respond(nil, line), []byte("\n"))
		oAns, err := o.Ask(line)
		if err != nil {
			t.Fatalf("request %q: %v", line, err)
		}
		if bytes.HasPrefix(goAns, []byte(`{"ok":true`)) && !oracle.Agree(goAns, oAns) {
			t.Fatalf("request: %s\nkernel/merge: %s\noracle:       %s", line, goAns, oAns)
		}
	})
}
