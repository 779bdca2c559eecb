package oracle

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAgree(t *testing.T) {
	ok1 := []byte(`{"ok":true,"rows":[[1]],"from":[0],"shard_limit":null}`)
	ok2 := []byte(`{"ok":true,"rows":[[1.0]],"from":[0],"shard_limit":null}`)
	e1 := []byte(`{"ok":false,"kind":"unsorted","field":"shards[0][1]","error":"a"}`)
	e2 := []byte(`{"ok":false,"kind":"unsorted","field":"","error":"b"}`)
	e3 := []byte(`{"ok":false,"kind":"bad_data","field":"","error":"b"}`)
	require.True(t, Agree(ok1, ok1))
	require.False(t, Agree(ok1, ok2), "a different display scale is a different answer")
	require.True(t, Agree(e1, e2), "field and error are for people")
	require.False(t, Agree(e1, e3))
	require.False(t, Agree(ok1, e1))
	require.False(t, Agree([]byte(`not json`), []byte(`not json`)))
	require.False(t, Agree([]byte(`{"ok":false}`), []byte(`{"ok":false}`)), "an error without a kind is not a response")
}

// The oracle answers the protocol's documented examples (kernel/merge/doc.go) with exactly
// the documented answers, and each line in order.
func TestOracleAnswersDocExamples(t *testing.T) {
	o := Require(t)
	for _, c := range []struct{ req, resp string }{
		{`{"op":"merge","order":[{"col":0,"dir":"desc"},{"col":1}],"limit":2,"offset":1,"shards":[[[3,"a"],[1,"b"]],[[null,"d"],[2,"c"]]]}`,
			`{"ok":true,"rows":[[3,"a"],[2,"c"]],"from":[0,1],"shard_limit":3}`},
		{`{"op":"aggregate","group_by":[0],"aggs":[{"fn":"count"},{"fn":"avg","col":1}],"input":"rows","shards":[[["a",1],["b",null]],[["a",2]]]}`,
			`{"ok":true,"rows":[["a",2,1.5000000000000000],["b",1,null]],"partials":[{"fn":"count"},{"fn":"sum","col":1},{"fn":"count","col":1}]}`},
		{`{"op":"partition_check","modulus":4,"parts":[[0,2],[3]]}`, `{"ok":true,"partition":false,"at":1,"owners":[]}`},
		{`{"op":"merge","order":[{"col":0,"dir":"up"}],"shards":[]}`, `{"ok":false,"kind":"bad_request"}`},
		{`{"op":"merge","order":[{"col":0}],"shards":[[[2],[1]]]}`, `{"ok":false,"kind":"unsorted"}`},
	} {
		got, err := o.Ask([]byte(c.req))
		require.NoError(t, err)
		require.True(t, Agree(got, []byte(c.resp)), "request %s\nwant %s\ngot  %s", c.req, c.resp, got)
	}
}

// Agree never panics, is symmetric, and agrees with itself on every response it accepts.
func FuzzAgree(f *testing.F) {
	f.Add([]byte(`{"ok":true,"rows":[],"from":[],"shard_limit":0}`), []byte(`{"ok":false,"kind":"bad_data","field":"","error":"x"}`))
	f.Add([]byte(`{"ok":false,"kind":"unsorted"}`), []byte(`{"ok":false,"kind":"unsorted","field":"a"}`))
	f.Add([]byte(`null`), []byte(`{"ok":1}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		if Agree(a, b) != Agree(b, a) {
			t.Fatalf("Agree is not symmetric on %q and %q", a, b)
		}
		if Agree(a, b) && !Agree(a, a) {
			t.Fatalf("%q agrees with %q but not with itself", a, b)
		}
	})
}
