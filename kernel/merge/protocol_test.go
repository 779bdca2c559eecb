package merge

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/big"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// docJSONLines returns the JSON lines of the package documentation's examples.
func docJSONLines(t testing.TB) []string {
	t.Helper()
	src, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	var lines []string
	for _, l := range strings.Split(string(src), "\n") {
		if s, ok := strings.CutPrefix(l, "//\t{"); ok {
			lines = append(lines, "{"+s)
		}
	}
	return lines
}

// TestDocExamples runs every request of the package documentation and checks the response
// printed under it, so the protocol's documentation cannot drift from the code. A "…" in a
// documented response stands for text left out.
func TestDocExamples(t *testing.T) {
	lines := docJSONLines(t)
	pairs := 0
	for i := 0; i+1 < len(lines); i++ {
		req, want := lines[i], lines[i+1]
		if !strings.HasPrefix(req, `{"op"`) || !strings.HasPrefix(want, `{"ok"`) {
			continue
		}
		pairs++
		got := strings.TrimSuffix(string(Respond(nil, []byte(req))), "\n")
		rest := got
		for j, piece := range strings.Split(want, "…") {
			k := strings.Index(rest, piece)
			require.True(t, k == 0 || j > 0 && k > 0, "request %s\ndocumented: %s\nanswered:   %s", req, want, got)
			rest = rest[k+len(piece):]
		}
		require.True(t, rest == "" || strings.HasSuffix(want, "…"), "request %s\ndocumented: %s\nanswered:   %s", req, want, got)
	}
	require.GreaterOrEqual(t, pairs, 9, "the documentation's examples were not found")
}

func TestDecodeRequestErrorsNameTheField(t *testing.T) {
	for _, c := range []struct{ line, kind, field, msg string }{
		{`not json`, KindBadRequest, "", "not JSON"},
		{`[1,2]`, KindBadRequest, "", "must be an object, not an array"},
		{`{"op":"merge","order":[],"shards":[]} x`, KindBadRequest, "", "unexpected data after the object"},
		{`{}`, KindBadRequest, "op", "missing"},
		{`{"op":1}`, KindBadRequest, "op", "must be a string, not a number"},
		{`{"op":"sort"}`, KindBadRequest, "op", `"sort" is not merge, aggregate or partition_check`},
		{`{"op":"merge","op":"merge"}`, KindBadRequest, "op", "appears twice"},
		{`{"op":"merge","bogus":1}`, KindBadRequest, "bogus", "unknown field"},
		{`{"op":"merge","aggs":[]}`, KindBadRequest, "aggs", `unknown field for op "merge"`},
		{`{"op":"merge","shards":[]}`, KindBadRequest, "order", "missing"},
		{`{"op":"merge","order":[{"dir":"asc"}],"shards":[]}`, KindBadRequest, "order[0].col", "missing"},
		{`{"op":"merge","order":[{"col":-1}],"shards":[]}`, KindBadRequest, "order[0].col", "outside 0..2147483647"},
		{`{"op":"merge","order":[{"col":1.5}],"shards":[]}`, KindBadRequest, "order[0].col", "is not an integer"},
		{`{"op":"merge","order":[{"col":0,"x":1}],"shards":[]}`, KindBadRequest, "order[0].x", "unknown field"},
		{`{"op":"merge","order":[{"col":0,"dir":"up"}],"shards":[]}`, KindBadRequest, "order[0].dir", `"up" is not asc or desc`},
		{`{"op":"merge","order":[],"limit":-1,"shards":[]}`, KindBadRequest, "limit", "outside 0..9223372036854775807"},
		{`{"op":"merge","order":[],"offset":"1","shards":[]}`, KindBadRequest, "offset", "must be an integer, not a string"},
		{`{"op":"merge","order":[],"offset":9223372036854775808,"shards":[]}`, KindBadRequest, "offset", "outside"},
		{`{"op":"merge","order":[]}`, KindBadRequest, "shards", "missing"},
		{`{"op":"merge","order":[],"shards":{}}`, KindBadRequest, "shards", "must be an array, not an object"},
		{`{"op":"merge","order":[],"shards":[[1]]}`, KindBadRequest, "shards[0][0]", "must be an array, not a number"},
		{`{"op":"merge","order":[],"shards":[[[1e3]]]}`, KindBadRequest, "shards[0][0][0]", "has an exponent"},
		{`{"op":"merge","order":[],"shards":[[[1,[2]]]]}`, KindBadRequest, "shards[0][0][1]", "a value must be null, a boolean, a number or a string, not an array"},
		{`{"op":"merge","order":[{"col":1}],"shards":[[[1]]]}`, KindBadData, "shards[0][0]", "row has 1 columns but ORDER BY #1 ASC NULLS LAST needs 2"},
		{`{"op":"merge","order":[{"col":0}],"shards":[[[2],[1]],[[1]]]}`, KindUnsorted, "shards[0][1]", "sorts before shards[0][0]"},
		{`{"op":"merge","order":[{"col":1}],"shards":[[[2,2],[1,1]],[[1]]]}`, KindBadData, "shards[1][0]", "row has 1 columns"},
		{`{"op":"aggregate","aggs":[],"input":"rows"}`, KindBadRequest, "shards", "missing"},
		{`{"op":"aggregate","aggs":[{"fn":"avg"}],"input":"rows","shards":[]}`, KindBadRequest, "aggs[0].col", "missing (only count may leave it out"},
		{`{"op":"aggregate","aggs":[{"fn":"median","col":0}],"input":"rows","shards":[]}`, KindBadRequest, "aggs[0].fn", `"median" is not an aggregate this reference knows`},
		{`{"op":"aggregate","aggs":[{"fn":"count","distinct":true}],"input":"rows","shards":[]}`, KindBadRequest, "aggs[0].distinct", "count(distinct *) is not SQL"},
		{`{"op":"aggregate","aggs":[{"fn":"sum","col":0,"distinct":1}],"input":"rows","shards":[]}`, KindBadRequest, "aggs[0].distinct", "must be true or false"},
		{`{"op":"aggregate","group_by":[-1],"aggs":[],"input":"rows","shards":[]}`, KindBadRequest, "group_by[0]", "outside"},
		{`{"op":"aggregate","aggs":[],"input":"raw","shards":[]}`, KindBadRequest, "input", `"raw" is not rows or partials`},
		{`{"op":"aggregate","aggs":[{"fn":"sum","col":0,"distinct":true}],"input":"rows","shards":[]}`, KindNotDecomposable, "aggs[0]", "sum(distinct) is not decomposable"},
		{`{"op":"aggregate","aggs":[{"fn":"min","col":0},{"fn":"string_agg","col":0}],"input":"rows","shards":[]}`, KindNotDecomposable, "aggs[1]", "string_agg is not decomposable"},
		// bad_request outranks not_decomposable even when it comes later in the line.
		{`{"op":"aggregate","aggs":[{"fn":"string_agg","col":0}],"input":"rows","shards":[[1]]}`, KindBadRequest, "shards[0][0]", "must be an array"},
		{`{"op":"aggregate","aggs":[{"fn":"sum","col":0}],"input":"rows","shards":[[["x"]]]}`, KindBadData, "shards[0][0][0]", "sum of \"x\", a text"},
		{`{"op":"aggregate","aggs":[{"fn":"sum","col":0}],"input":"partials","shards":[[[1,2]]]}`, KindBadData, "shards[0][0]", "a partial row has 2 columns; this plan's have 1"},
		{`{"op":"partition_check","parts":[]}`, KindBadRequest, "space", "give exactly one of space (ranges) and modulus (remainders)"},
		{`{"op":"partition_check","space":[0,1],"modulus":1,"parts":[]}`, KindBadRequest, "space", "give exactly one"},
		{`{"op":"partition_check","space":[0,1]}`, KindBadRequest, "parts", "missing"},
		{`{"op":"partition_check","space":[1,0],"parts":[]}`, KindBadRequest, "space", "[1, 0) is empty"},
		{`{"op":"partition_check","space":[0,1,2],"parts":[]}`, KindBadRequest, "space", "two integers, not 3 values"},
		{`{"op":"partition_check","space":[0,9],"parts":[[[0,5]],[[5,5]]]}`, KindBadRequest, "parts[1][0]", "[5, 5) is empty"},
		{`{"op":"partition_check","space":[0,9],"parts":[[[0,"5"]]]}`, KindBadRequest, "parts[0][0][1]", "must be an integer, not a string"},
		{`{"op":"partition_check","modulus":0,"parts":[]}`, KindBadRequest, "modulus", "0 is not a positive integer"},
		{`{"op":"partition_check","modulus":2,"parts":[[0.5]]}`, KindBadRequest, "parts[0][0]", "is not an integer"},
		{`{"op":"partition_check","modulus":1` + strings.Repeat("0", 1000) + `,"parts":[]}`, KindBadRequest, "modulus", "longer than the 1000 this protocol reads"},
	} {
		got := Respond(nil, []byte(c.line))
		var resp struct {
			OK    bool   `json:"ok"`
			Kind  string `json:"kind"`
			Field string `json:"field"`
			Error string `json:"error"`
		}
		require.NoError(t, json.Unmarshal(got, &resp), "%s -> %s", c.line, got)
		require.False(t, resp.OK, c.line)
		require.Equal(t, c.kind, resp.Kind, "%s -> %s", c.line, got)
		require.Equal(t, c.field, resp.Field, "%s -> %s", c.line, got)
		require.Contains(t, resp.Error, c.msg, c.line)
		require.True(t, strings.HasPrefix(resp.Error, "merge: "), resp.Error)
		require.Contains(t, resp.Error, c.field, "the message names the field")
	}
}

func TestRespondResults(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{`{"op":"merge","order":[],"shards":[]}`, `{"ok":true,"rows":[],"from":[],"shard_limit":null}`},
		{` {"shards":[[["b"]],[["a"]]], "order":[{"col":0,"nulls":"first"}], "op":"merge", "limit":null} `, `{"ok":true,"rows":[["a"],["b"]],"from":[1,0],"shard_limit":null}`},
		{`{"op":"merge","order":[{"col":0}],"limit":0,"offset":5,"shards":[[[1]]]}`, `{"ok":true,"rows":[],"from":[],"shard_limit":0}`},
		{`{"op":"merge","order":[{"col":0}],"limit":9223372036854775807,"offset":1,"shards":[[[1]]]}`, `{"ok":true,"rows":[],"from":[],"shard_limit":null}`},
		{`{"op":"merge","order":[{"col":0,"dir":"desc","nulls":"last"}],"shards":[[[1.50,"x\u0000\"y"],[1.5,true]],[[123456789012345678901234567890],[null]]]}`,
			`{"ok":true,"rows":[[123456789012345678901234567890],[1.50,"x\u0000\"y"],[1.5,true],[null]],"from":[1,0,0,1],"shard_limit":null}`},
		{`{"op":"aggregate","group_by":[0],"aggs":[{"fn":"count","col":1},{"fn":"min","col":1,"distinct":true}],"input":"partials","shards":[[["a",2,5]],[["a",1,3],[null,0,null]]]}`,
			`{"ok":true,"rows":[["a",3,3],[null,0,null]],"partials":[{"fn":"count","col":1},{"fn":"min","col":1}]}`},
		{`{"op":"aggregate","aggs":[],"input":"rows","shards":[]}`, `{"ok":true,"rows":[[]],"partials":[]}`},
		{`{"op":"partition_check","space":[-5,18446744073709551616],"parts":[[[-5,0]],[[0,18446744073709551616]]]}`, `{"ok":true,"partition":true}`},
		{`{"op":"partition_check","space":[0,10],"parts":[[[0,10]],[]]}`, `{"ok":true,"partition":false,"empty_part":1}`},
		{`{"op":"partition_check","modulus":3,"parts":[[0,1],[1,2]]}`, `{"ok":true,"partition":false,"at":1,"owners":[0,1]}`},
	} {
		require.Equal(t, c.want+"\n", string(Respond(nil, []byte(c.line))), c.line)
	}
}

func genRequest() *rapid.Generator[Request] {
	return rapid.Custom(func(t *rapid.T) Request {
		switch rapid.IntRange(0, 2).Draw(t, "op") {
		case 0:
			c := genMergeCase().Draw(t, "merge")
			if c.Limit.Offset == math.MaxInt64 && rapid.Bool().Draw(t, "smallOffset") {
				c.Limit.Offset = 3
			}
			return &MergeRequest{Order: c.By, Limit: c.Limit, Shards: c.Shards}
		case 1:
			c := genAggCase().Draw(t, "aggregate")
			return &AggregateRequest{Aggregation: c.A, Input: Input(rapid.IntRange(1, 2).Draw(t, "input")), Shards: c.Shards}
		}
		c := genPartitionCase().Draw(t, "partition")
		if rapid.Bool().Draw(t, "modulus") {
			rs := make([][]*big.Int, len(c.Parts))
			for i, p := range c.Parts {
				for _, s := range p {
					rs[i] = append(rs[i], s.Lo)
				}
			}
			return &PartitionRequest{Modulus: big.NewInt(rapid.Int64Range(1, 9).Draw(t, "m")), Remainders: rs}
		}
		return &PartitionRequest{Space: c.Space, Parts: c.Parts}
	})
}

// TestRequestRoundTrip: AppendRequest and DecodeRequest are inverses on every request the
// generators make, so a driver can feed this package and another implementation the same bytes.
func TestRequestRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		req := genRequest().Draw(t, "req")
		line := AppendRequest(nil, req)
		require.True(t, bytes.HasSuffix(line, []byte("\n")))
		require.Equal(t, 1, bytes.Count(line, []byte("\n")), "one line: %s", line)
		back, err := DecodeRequest(line)
		require.NoError(t, err, "%s", line)
		require.Equal(t, string(line), string(AppendRequest(nil, back)))
		if m, ok := req.(*MergeRequest); ok {
			bm := back.(*MergeRequest)
			require.Equal(t, m.Limit, bm.Limit)
			require.True(t, len(m.Shards) == len(bm.Shards))
			for s := range m.Shards {
				require.True(t, identicalRows(m.Shards[s], bm.Shards[s]), "shard %d", s)
			}
		}
		// The in-memory API and the protocol give the same answer.
		require.Equal(t, string(respond(nil, req, 0)), string(Respond(nil, line)))
	})
}

// lineReader hands Serve one line per Read and checks, before handing the next, that every
// earlier request has been answered: Serve must flush instead of waiting for more input.
type lineReader struct {
	t       *testing.T
	lines   []string
	answers func() int
	sent    int
	blank   int
}

func (r *lineReader) Read(p []byte) (int, error) {
	if r.sent > 0 {
		require.Equal(r.t, r.sent-r.blank, r.answers(), "Serve waited for input with answers unflushed")
	}
	if r.sent == len(r.lines) {
		return 0, io.EOF
	}
	line := r.lines[r.sent]
	r.sent++
	if strings.TrimSpace(line) == "" {
		r.blank++
	}
	return copy(p, line+"\n"), nil
}

func TestServeAnswersEachLineAndFlushes(t *testing.T) {
	var out bytes.Buffer
	lines := []string{
		`{"op":"partition_check","modulus":1,"parts":[[0]]}`,
		``,
		`garbage`,
		`   `,
		`{"op":"merge","order":[{"col":0}],"shards":[[[1]],[[0]]]}`,
	}
	r := &lineReader{t: t, lines: lines, answers: func() int { return bytes.Count(out.Bytes(), []byte("\n")) }}
	require.NoError(t, Serve(r, &out))
	require.Equal(t, `{"ok":true,"partition":true}
{"ok":false,"kind":"bad_request","field":"","error":"merge: not JSON: invalid character 'g' looking for beginning of value"}
{"ok":true,"rows":[[0],[1]],"from":[1,0],"shard_limit":null}
`, out.String())
}

func TestServeLastLineWithoutNewline(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, Serve(strings.NewReader(`{"op":"partition_check","modulus":1,"parts":[[0]]}`), &out))
	require.Equal(t, `{"ok":true,"partition":true}`+"\n", out.String())
}

func TestServeRefusesLongLines(t *testing.T) {
	var out bytes.Buffer
	long := `{"op":"merge","order":[],"shards":[[[` + strings.Repeat(`"xxxxxxxx",`, 20_000) + `1]]]}`
	in := long + "\n" + `{"op":"partition_check","modulus":1,"parts":[[0]]}` + "\n"
	require.NoError(t, serve(strings.NewReader(in), &out, 100_000))
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, got, 2)
	require.Equal(t, `{"ok":false,"kind":"bad_request","field":"","error":"merge: the line is longer than 100000 bytes"}`, got[0])
	require.Equal(t, `{"ok":true,"partition":true}`, got[1], "the next line is read normally")
}

type failing struct{ err error }

func (f failing) Read([]byte) (int, error)  { return 0, f.err }
func (f failing) Write([]byte) (int, error) { return 0, f.err }

func TestServeReportsIOErrors(t *testing.T) {
	boom := errors.New("boom")
	err := Serve(failing{boom}, io.Discard)
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, "merge: reading requests")
	err = Serve(strings.NewReader(`{"op":"partition_check","modulus":1,"parts":[[0]]}`+"\n"), failing{boom})
	require.ErrorIs(t, err, boom)
	require.ErrorContains(t, err, "merge: writing a response")
}

func TestAppendStringEscapes(t *testing.T) {
	require.Equal(t, `"\b\f\n\r\t\u001f\u0000 ~`+"\x7f"+`"`, string(appendString(nil, "\b\f\n\r\t\x1f\x00 ~\x7f")))
	require.Equal(t, `"日本 \ufffd <>&"`, string(appendString(nil, "日本 \xff <>&")), "UTF-8 as is, a bad byte as U+FFFD, no HTML escaping")
	var s string
	require.NoError(t, json.Unmarshal(appendString(nil, "a\"\\\x01é"), &s))
	require.Equal(t, "a\"\\\x01é", s)
	require.Equal(t, "rows", InputRows.String())
	require.Equal(t, "Input(7)", Input(7).String())
	require.Equal(t, "partition_check", (&PartitionRequest{}).Op())
}
