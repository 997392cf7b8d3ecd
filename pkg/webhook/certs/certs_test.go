package certs

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	b, err := Generate([]string{"svc.ns.svc", "127.0.0.1"}, now)
	if err != nil {
		t.Fatal(err)
	}
	other, err := Generate([]string{"svc.ns.svc"}, now)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		b     Bundle
		hosts []string
		at    time.Time
		want  string // "" means usable
	}{
		{"fresh, both hosts", b, []string{"svc.ns.svc", "127.0.0.1"}, now, ""},
		{"another host", b, []string{"other.ns.svc"}, now, "other.ns.svc"},
		{"near its end", b, []string{"svc.ns.svc"}, now.Add(Validity - RenewBefore/2), "expires"},
		{"CA of another chain", Bundle{CA: other.CA, Cert: b.Cert, Key: b.Key}, []string{"svc.ns.svc"}, now, "svc.ns.svc"},
		{"key of another chain", Bundle{CA: b.CA, Cert: b.Cert, Key: other.Key}, []string{"svc.ns.svc"}, now, "key pair"},
		{"no CA", Bundle{Cert: b.Cert, Key: b.Key}, []string{"svc.ns.svc"}, now, "no CA"},
		{"garbage", Bundle{CA: []byte("x"), Cert: []byte("y"), Key: []byte("z")}, []string{"svc.ns.svc"}, now, "key pair"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.b.Check(tc.hosts, tc.at)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestCABundlePatchTouchesOnlyStaleBundles(t *testing.T) {
	ca := []byte("CA")
	if p := caBundlePatch([]string{"a", "b"}, [][]byte{ca, ca}, ca); p != nil {
		t.Errorf("patch %s for bundles already current", p)
	}
	p := caBundlePatch([]string{"a", "b", "c"}, [][]byte{ca, nil, []byte("old")}, ca)
	var ops []map[string]any
	if err := json.Unmarshal(p, &ops); err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{
		{"op": "test", "path": "/webhooks/1/name", "value": "b"},
		{"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": "Q0E="},
		{"op": "test", "path": "/webhooks/2/name", "value": "c"},
		{"op": "add", "path": "/webhooks/2/clientConfig/caBundle", "value": "Q0E="},
	}
	if len(ops) != len(want) {
		t.Fatalf("ops %v", ops)
	}
	for i := range want {
		for k, v := range want[i] {
			if ops[i][k] != v {
				t.Errorf("op %d: %s = %v, want %v", i, k, ops[i][k], v)
			}
		}
	}
}
