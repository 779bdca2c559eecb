package merge

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// fuzzSeeds are the documentation's requests and a few broken ones.
func fuzzSeeds(f *testing.F) {
	for _, l := range docJSONLines(f) {
		if strings.HasPrefix(l, `{"op"`) {
			f.Add([]byte(l))
		}
	}
	for _, s := range []string{
		``, `{`, `{"op":"merge"`, `{"op":"merge","order":[{"col":99999999999}],"shards":[]}`,
		`{"op":"merge","order":[{"col":0}],"limit":1,"offset":9223372036854775807,"shards":[[[1],[2]],[[-0.00]]]}`,
		`{"op":"aggregate","group_by":[0,0],"aggs":[{"fn":"avg","col":1},{"fn":"count"}],"input":"rows","shards":[[[1,0.001],[1,-9223372036854775808]]]}`,
		`{"op":"partition_check","space":[-1e2,5],"parts":[]}`,
		`{"op":"partition_check","modulus":3,"parts":[[0,0],[-1,2,3]]}`,
		`{"op":"merge","order":[],"shards":[[["\ud800"]]]}`,
	} {
		f.Add([]byte(s))
	}
}

// FuzzDecodeRequest: the decoder never panics; a refusal is a *FieldError (with the whole line
// or a field named) or a *NotDecomposableError; an accepted request re-encodes to a line that
// decodes to the same encoding, and answering it gives one JSON line.
func FuzzDecodeRequest(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, line []byte) {
		req, err := DecodeRequest(line)
		if err != nil {
			var fe *FieldError
			var nd *NotDecomposableError
			switch {
			case errors.As(err, &fe):
				if fe.Field != "" && !strings.Contains(err.Error(), fe.Field) {
					t.Fatalf("error %q does not name its field %q", err, fe.Field)
				}
			case errors.As(err, &nd):
			default:
				t.Fatalf("untyped error %T: %v", err, err)
			}
			if !strings.HasPrefix(err.Error(), "merge: ") {
				t.Fatalf("error without the package prefix: %v", err)
			}
			return
		}
		enc := AppendRequest(nil, req)
		back, err := DecodeRequest(enc)
		if err != nil {
			t.Fatalf("re-encoded request %s does not decode: %v", enc, err)
		}
		if again := AppendRequest(nil, back); !bytes.Equal(enc, again) {
			t.Fatalf("round trip changed the request:\n%s\n%s", enc, again)
		}
		checkResponseLine(t, Respond(nil, line))
	})
}

func checkResponseLine(t *testing.T, out []byte) {
	t.Helper()
	if !bytes.HasSuffix(out, []byte("\n")) || bytes.Count(out, []byte("\n")) != 1 {
		t.Fatalf("a response must be exactly one line: %q", out)
	}
	var resp map[string]any
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("response is not JSON: %v: %s", err, out)
	}
	if _, ok := resp["ok"].(bool); !ok {
		t.Fatalf("response has no ok: %s", out)
	}
}

// FuzzServe: whatever arrives, Serve ends without error and writes one JSON line per
// non-blank input line.
func FuzzServe(f *testing.F) {
	fuzzSeeds(f)
	f.Add([]byte("\n\n{\"op\":\"merge\"}\n  \n[1]\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		if err := Serve(bytes.NewReader(in), &out); err != nil {
			t.Fatal(err)
		}
		want := 0
		for _, l := range bytes.Split(in, []byte("\n")) {
			if len(bytes.TrimSpace(l)) > 0 {
				want++
			}
		}
		lines := bytes.SplitAfter(out.Bytes(), []byte("\n"))
		if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
			lines = lines[:len(lines)-1]
		}
		if len(lines) != want {
			t.Fatalf("%d non-blank lines in, %d responses out", want, len(lines))
		}
		for _, l := range lines {
			checkResponseLine(t, l)
		}
	})
}
