package lazylog

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/go-logr/logr"
)

// recordingSink counts the WithValues calls it gets and records each line
// with its name and all its values.
type recordingSink struct {
	withValues *int
	lines      *[]string
	name       string
	kv         []any
}

func (s recordingSink) Init(logr.RuntimeInfo)  {}
func (s recordingSink) Enabled(level int) bool { return level == 0 }
func (s recordingSink) Info(_ int, msg string, kv ...any) {
	*s.lines = append(*s.lines, fmt.Sprint(s.name, " ", msg, append(append([]any{}, s.kv...), kv...)))
}
func (s recordingSink) Error(err error, msg string, kv ...any) {
	s.Info(0, msg+": "+err.Error(), kv...)
}
func (s recordingSink) WithValues(kv ...any) logr.LogSink {
	*s.withValues++
	s.kv = append(append([]any{}, s.kv...), kv...)
	return s
}
func (s recordingSink) WithName(name string) logr.LogSink { s.name += "/" + name; return s }

func TestValuesWaitForALine(t *testing.T) {
	var calls int
	var lines []string
	l := New(logr.New(recordingSink{withValues: &calls, lines: &lines}))
	l = l.WithValues("a", 1).WithName("x").WithValues("b", 2)
	other := l.WithValues("c", 3) // a sibling does not change l
	if calls != 0 {
		t.Fatalf("%d WithValues calls reached the sink before any line", calls)
	}
	l.Info("hello", "k", "v")
	l.V(1).Info("not enabled")
	other.Error(errors.New("boom"), "failed")
	want := []string{"/x hello[a 1 b 2 k v]", "/x failed: boom[a 1 b 2 c 3]"}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("lines %q, want %q", lines, want)
	}
	if calls != 2 {
		t.Errorf("%d WithValues calls, want one per line written", calls)
	}
}
