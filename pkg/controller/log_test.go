package controller

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	uberzap "go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestReconcileLogger(t *testing.T) {
	var buf bytes.Buffer
	base := zap.New(zap.WriteTo(&buf), zap.UseDevMode(false), zap.RawZapOpts(uberzap.AddCaller()))
	req := &reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "ta"}}
	l := reconcileLogger(base)(req).WithValues("reconcileID", "r1")
	if buf.Len() != 0 {
		t.Fatalf("wrote before logging: %s", buf.String())
	}
	l.WithName("sub").Info("hello", "k", 1)
	l.Error(errors.New("boom"), "failed")
	l.V(5).Info("not enabled")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), buf.String())
	}
	for i, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %d: %v: %s", i, err, line)
		}
		for k, want := range map[string]any{"controller": "taskaction", "controllerKind": "TaskAction", "namespace": "ns", "name": "ta", "reconcileID": "r1"} {
			if m[k] != want {
				t.Errorf("line %d: %s = %v, want %v", i, k, m[k], want)
			}
		}
		// The caller is this file, not the sink that deferred the values.
		if c, _ := m["caller"].(string); !strings.HasPrefix(c, "controller/log_test.go:") {
			t.Errorf("line %d: caller %q, want this test", i, c)
		}
	}
	if !strings.Contains(lines[0], `"logger":"sub"`) || !strings.Contains(lines[0], `"k":1`) {
		t.Errorf("first line lacks its name or values: %s", lines[0])
	}
	if !strings.Contains(lines[1], `"error":"boom"`) {
		t.Errorf("second line lacks its error: %s", lines[1])
	}
}
