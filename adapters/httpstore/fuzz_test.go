package httpstore

import (
	"testing"

	"loam.dev/router/adapters"
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
