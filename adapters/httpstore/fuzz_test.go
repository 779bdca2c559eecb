package httpstore

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/memstore"
)

// FuzzDecodeResponse: whatever a server (or something pretending to be one) answers, the
// client's decoding returns an error or a value, never panics.
func FuzzDecodeResponse(f *testing.F) {
	f.Add([]byte(`{"version":3}`))
	f.Add([]byte(`{"error":{"kind":"conflict","message":"m","expected":1,"current":"AAEC"}}`))
	f.Add([]byte(`{"error":{"kind":"blob_conflict","key":"k","expected":1,"current_version":2}}`))
	f.Add([]byte(`{"blobs":[{"key":"a","version":1,"data":"eA=="}]}`))
	f.Add([]byte(`{"record":"AQID"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := decodeResponse(body)
		if err != nil {
			return
		}
		if r.Error != nil {
			if e := r.Error.asError(adapters.DBRef{Namespace: "ns", Database: "db"}); e == nil {
				t.Fatal("a wire error decoded to nil")
			}
		}
	})
}

// FuzzServerRequest: whatever a client sends to the server's request path (any op, any
// body, with or without the credential), the server answers with a JSON body and never
// panics; a request without the credential never changes the store.
func FuzzServerRequest(f *testing.F) {
	f.Add("put", []byte(`{"key":"k","data":"eA=="}`), true)
	f.Add("cas", []byte(`{"namespace":"ns","database":"db","expect":0,"record":"AQID"}`), true)
	f.Add("list", []byte(`{"prefix":"","limit":1,"list_after":"a"}`), true)
	f.Add("delete", []byte(`{"key":"seed","expect":1}`), false)
	f.Add("watch", []byte(`{"namespace":"ns","database":"db","after":1,"wait_ms":1}`), true)
	f.Add("get", []byte(`{"key":`), true)
	f.Fuzz(func(t *testing.T, op string, body []byte, auth bool) {
		st := memstore.New()
		if _, err := st.PutBlob(t.Context(), "seed", 0, []byte("s")); err != nil {
			t.Fatal(err)
		}
		h := Handler(st, &Options{Credentials: []Credential{{Name: "f", Role: RoleController, Token: "tok"}}, WatchWait: time.Millisecond})
		req := httptest.NewRequest(http.MethodPost, "/v1/"+url.PathEscape(op), bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if auth {
			req.Header.Set("Authorization", "Bearer tok")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if _, err := decodeResponse(rec.Body.Bytes()); err != nil {
			t.Fatalf("status %d with a body that is not JSON: %q", rec.Code, rec.Body.String())
		}
		if !auth {
			bs, err := st.ListBlobs(t.Context(), "")
			if err != nil || len(bs) != 1 || bs[0].Key != "seed" || bs[0].Version != 1 {
				t.Fatalf("an unauthenticated request changed the store: %v %v", bs, err)
			}
		}
	})
}
