package v1

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestIsTerminalAndCompletedAt(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC))
	cond := func(typ string, s metav1.ConditionStatus, when metav1.Time) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, LastTransitionTime: when, Reason: "R"}
	}
	cases := []struct {
		name     string
		conds    []metav1.Condition
		terminal bool
		ended    bool
	}{
		{"no conditions", nil, false, false},
		{"progressing", []metav1.Condition{cond(ConditionProgressing, metav1.ConditionTrue, at)}, false, false},
		{"succeeded", []metav1.Condition{cond(ConditionSucceeded, metav1.ConditionTrue, at)}, true, true},
		{"failed", []metav1.Condition{cond(ConditionFailed, metav1.ConditionTrue, at)}, true, true},
		{"failed false", []metav1.Condition{cond(ConditionFailed, metav1.ConditionFalse, at)}, false, false},
		{"succeeded without a time", []metav1.Condition{cond(ConditionSucceeded, metav1.ConditionTrue, metav1.Time{})}, true, false},
	}
	for _, c := range cases {
		st := &TaskActionStatus{Conditions: c.conds}
		got, ok := st.CompletedAt()
		if st.IsTerminal() != c.terminal || ok != c.ended || (ok && !got.Equal(at.Time)) {
			t.Errorf("%s: IsTerminal %v CompletedAt %v %v; want %v %v", c.name, st.IsTerminal(), got, ok, c.terminal, c.ended)
		}
	}
}
