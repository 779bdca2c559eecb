package driver

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/memstore"
)

// FuzzDecodeLease: any lease blob either decodes to a TTL that is a positive Duration (or
// none), or is refused as corrupt; what decodes encodes back to the same lease.
func FuzzDecodeLease(f *testing.F) {
	l := &Lease{opts: LeaseOptions{Holder: "ctl-a", TTL: 10 * time.Second}}
	f.Add(l.encode(0, false))
	f.Add(l.encode(7, true))
	f.Add([]byte(`{"holder":"x","ttl_ms":315360000000}`)) // ten years
	f.Add([]byte(`{"holder":"x","ttl_ms":9223372036854775807}`))
	f.Add([]byte(`{"holder":"x","ttl_ms":-1}`))
	f.Add([]byte(`{"ttl_ms":1e30}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"holder":5}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := decodeLease(data)
		if err != nil {
			if !errors.Is(err, adapters.ErrCorrupt) {
				t.Fatalf("a refused blob must be ErrCorrupt: %v", err)
			}
			if d != (leaseData{}) {
				t.Fatalf("a refused blob yields the zero lease, got %+v", d)
			}
			return
		}
		if d.TTLMS < 0 || time.Duration(d.TTLMS)*time.Millisecond < 0 {
			t.Fatalf("ttl_ms %d decoded to a negative TTL", d.TTLMS)
		}
		again, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		d2, err := decodeLease(again)
		if err != nil || d2 != d {
			t.Fatalf("re-encoded lease %s decodes to %+v, %v; want %+v", again, d2, err, d)
		}
	})
}

// FuzzReadAudit: an audit entry blob of any content is either read back (with its key) or
// refused as corrupt, naming the key; never a panic.
func FuzzReadAudit(f *testing.F) {
	e, _ := json.Marshal(AuditEntry{At: 1700000000000, Holder: "ctl-a", Epoch: 3, Event: AuditExec, Machine: "configpush", ID: "default/app", Step: "g4/files", What: "WriteFiles", Result: "ok"})
	f.Add(e)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"at":"x"}`))
	f.Add([]byte(`[1,2]`))
	f.Add([]byte("\x00\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := memstore.New()
		ctx := context.Background()
		key := AuditPrefix + "00000000000000000001-x"
		if _, err := s.PutBlob(ctx, key, 0, data); err != nil {
			t.Fatal(err)
		}
		got, err := ReadAudit(ctx, s, AuditFilter{})
		if err != nil {
			if !errors.Is(err, adapters.ErrCorrupt) {
				t.Fatalf("want ErrCorrupt, got %v", err)
			}
			return
		}
		if len(got) != 1 || got[0].Key != key {
			t.Fatalf("want the one entry with its key, got %+v", got)
		}
	})
}
