package driver

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
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
		want := 1
		var batch []json.RawMessage
		if json.Unmarshal(data, &batch) == nil {
			want = len(batch)
		}
		if len(got) != want {
			t.Fatalf("want %d entries, got %+v", want, got)
		}
		for _, e := range got {
			if !strings.HasPrefix(e.Key, key) {
				t.Fatalf("an entry without its blob's key: %+v", e)
			}
		}
	})
}

// FuzzStampAuditWho: whatever a client sends as an audit entry (or a step's batch), the
// store server either refuses it or stamps every entry with the identity it authenticated
// (a relayed entry that names its Who keeps it only with keep); never a panic.
func FuzzStampAuditWho(f *testing.F) {
	e, _ := json.Marshal(AuditEntry{Event: AuditExec, What: "Pause step=a/2/pause/r1", Who: "ops"})
	f.Add(e, false)
	f.Add([]byte("["+string(e)+","+string(e)+"]"), true)
	f.Add([]byte(`[]`), false)
	f.Add([]byte(`[{"event":"exec"}]`), false)
	f.Fuzz(func(t *testing.T, data []byte, keep bool) {
		out, err := StampAuditWho(data, "ctl", keep)
		if err != nil {
			return
		}
		in, _, err := decodeAuditBlob(data)
		if err != nil {
			t.Fatalf("stamped what does not decode: %v", err)
		}
		got, _, err := decodeAuditBlob(out)
		if err != nil || len(got) != len(in) {
			t.Fatalf("stamped %d entries into %d (%v)", len(in), len(got), err)
		}
		for i, g := range got {
			if want := "ctl"; (!keep || in[i].Who == "") && g.Who != want || keep && in[i].Who != "" && g.Who != in[i].Who {
				t.Fatalf("entry %d: Who %q (sent %q, keep %v)", i, g.Who, in[i].Who, keep)
			}
		}
	})
}
