package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"

	"loam.dev/router/adapters"
	"loam.dev/router/adapters/memstore"
	"loam.dev/router/controller"
	"loam.dev/router/kernel/fencing"
	"loam.dev/router/kernel/shardmap"
	"loam.dev/router/machine/fencemigrate"
)

// fuzzBlob is the property every request and decision blob read from the store keeps: any
// content is either refused as corrupt (naming the key) or decoded, and what decodes
// encodes to a blob that decodes to the same value.
func fuzzBlob[T any](t *testing.T, data []byte) {
	s := memstore.New()
	ctx := context.Background()
	const key = "request/x/default/app"
	if _, err := s.PutBlob(ctx, key, 0, data); err != nil {
		t.Fatal(err)
	}
	v, _, err := controller.GetJSON[T](ctx, s, key)
	if err != nil {
		if !errors.Is(err, adapters.ErrCorrupt) || !strings.Contains(err.Error(), key) {
			t.Fatalf("want ErrCorrupt naming %s, got %v", key, err)
		}
		return
	}
	again, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutBlob(ctx, key, 1, again); err != nil {
		t.Fatal(err)
	}
	v2, _, err := controller.GetJSON[T](ctx, s, key)
	if err != nil {
		t.Fatalf("re-encoded %s does not decode: %v", again, err)
	}
	third, _ := json.Marshal(v2)
	if string(third) != string(again) {
		t.Fatalf("not stable: %s then %s", again, third)
	}
}

func seedJSON(f *testing.F, vs ...any) {
	for _, v := range vs {
		b, err := json.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[`))
	f.Add([]byte("\xff\x00"))
}

// FuzzCutoverRequestBlob: the request `cutover start` writes.
func FuzzCutoverRequestBlob(f *testing.F) {
	seedJSON(f, controller.CutoverRequest{Plan: cutoverPlanForTest(), By: "ops", At: 1700000000000, From: 2})
	f.Add([]byte(`{"plan":{"designated":5},"from":-1}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzBlob[controller.CutoverRequest](t, data) })
}

// FuzzCutoverDecisionBlob: the decision `cutover finalize|rollback` writes.
func FuzzCutoverDecisionBlob(f *testing.F) {
	seedJSON(f, controller.CutoverDecision{Decision: "finalize", By: "ops", At: 1}, controller.CutoverDecision{Decision: "reverse"})
	f.Fuzz(func(t *testing.T, data []byte) { fuzzBlob[controller.CutoverDecision](t, data) })
}

// FuzzFailoverRequestBlob: the request `failover start` writes.
func FuzzFailoverRequestBlob(f *testing.F) {
	seedJSON(f, controller.FailoverRequest{Shard: "s0", Promoted: shardmap.Backend{Host: "10.0.0.2", Port: 5432, Database: "app"}, By: "ops", At: 1})
	f.Fuzz(func(t *testing.T, data []byte) { fuzzBlob[controller.FailoverRequest](t, data) })
}

// FuzzParseAlertLines: an alerts file of any content is read line by line or refused
// naming the line; every line read encodes back to a line that reads the same.
func FuzzParseAlertLines(f *testing.F) {
	f.Add([]byte(`{"at":1,"op":"raise","step":"s","id":"x","source":"indoubt","alert":{"id":"x"}}` + "\n" + `{"at":2,"op":"clear","id":"x"}` + "\n"))
	f.Add([]byte("\n\n"))
	f.Add([]byte(`{"op":"raise"}` + "\nnot json\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines, err := controller.ParseAlertLines(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "line ") {
				t.Fatalf("the error names no line: %v", err)
			}
			return
		}
		for _, l := range lines {
			b, err := json.Marshal(l)
			if err != nil {
				t.Fatal(err)
			}
			back, err := controller.ParseAlertLines(b)
			if err != nil || len(back) != 1 {
				t.Fatalf("%s reads back as %v, %v", b, back, err)
			}
		}
	})
}

// FuzzParseEndpoint: a `--to` endpoint is refused or is a host a record accepts (a DNS
// name or an IP literal) with a non-zero port, which formats back to the same endpoint.
func FuzzParseEndpoint(f *testing.F) {
	for _, s := range []string{"10.0.0.2:5432", "pg-1.db.internal:5432/app", "[::1]:5432/x", "a,b:5432", "u@h:5432", "h:0", "h:65536", ":5432", "h:5432/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := parseEndpoint(s, "def")
		if err != nil {
			return
		}
		if !shardmap.IsHost(b.Host) || b.Port == 0 || b.Database == "" {
			t.Fatalf("%q parsed to %+v", s, b)
		}
		again := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) + "/" + b.Database
		b2, err := parseEndpoint(again, "def")
		if err != nil || b2.Host != b.Host || b2.Port != b.Port {
			t.Fatalf("%q formats as %q, which parses to %+v, %v", s, again, b2, err)
		}
	})
}

// FuzzRoster: a roster (--pods, or the pods key) is refused with a reason or lists unique
// non-empty names without separators, and merging it with any reports keeps every listed
// pod.
func FuzzRoster(f *testing.F) {
	f.Add("relay-0,relay-1", "relay-1=B")
	f.Add("a,,b", "")
	f.Add("a,a", "a=C,z=O")
	f.Add(" ", "x=Q")
	f.Fuzz(func(t *testing.T, pods, reports string) {
		list := strings.Split(pods, ",")
		if msg := controller.CheckRoster(list); msg != "" {
			return
		}
		seen := map[string]bool{}
		for _, p := range list {
			if strings.TrimSpace(p) == "" || strings.ContainsAny(p, ", \t\n") || seen[p] {
				t.Fatalf("checkRoster accepted %q", list)
			}
			seen[p] = true
		}
		reported := map[string]fencing.Version{}
		for _, r := range strings.Split(reports, ",") {
			name, v, ok := strings.Cut(r, "=")
			if ver, err := fencing.ParseVersion(v); ok && err == nil {
				reported[name] = ver
			}
		}
		fed := map[string]bool{}
		for _, in := range mergeRoster(list, reported, nil).Inputs {
			if r, ok := in.(fencemigrate.PodReported); ok {
				fed[r.Pod] = true
			}
		}
		for _, p := range list {
			if !fed[p] {
				t.Fatalf("roster pod %q was not fed to the machine", p)
			}
		}
	})
}
