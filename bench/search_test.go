package main

import (
	"slices"
	"strings"
	"testing"
)

// The finer search narrows the edge between the coarse steps' last pass and
// first failure, at one decimal.
func TestRefineRate(t *testing.T) {
	pass, fail := 40.0, 50.0
	var rates []float64
	for range 3 {
		r := refineRate(pass, fail)
		if r <= pass || r >= fail {
			t.Fatalf("refineRate(%v, %v) = %v, not between them", pass, fail, r)
		}
		rates = append(rates, r)
		fail = r // as if each finer step failed
	}
	if want := []float64{44.7, 42.3, 41.1}; !slices.Equal(rates, want) {
		t.Errorf("rates %v, want %v", rates, want)
	}
	if r := refineRate(40, 40.1); r > 40 && r < 40.1 {
		t.Errorf("refineRate(40, 40.1) = %v: nothing lies between at one decimal", r)
	}
}

// The report names the finer steps and stops at the lowest failing rate.
func TestSearchMarkdownFinerSteps(t *testing.T) {
	r := &Report{SearchParams: &SearchParams{StartRate: 40, Factor: 1.25, MaxSteps: 4, Refine: 2}, Search: []*SearchResult{{
		Mode: "executor", SustainedRate: 44.7,
		Steps: []*SearchStep{
			{Rate: 40, Pass: true},
			{Rate: 50, Why: "p99 create → terminal 40000 ms > 30000 ms"},
			{Rate: 44.7, Pass: true, Refine: true},
			{Rate: 47.3, Why: "p99 create → terminal 31000 ms > 30000 ms", Refine: true},
		},
	}}}
	md := r.SearchMarkdown()
	for _, want := range []string{"up to 2 finer steps", "| 44.7 (finer) |", "| executor | 44.7 | 47.3/s: p99 create → terminal 31000 ms"} {
		if !strings.Contains(md, want) {
			t.Errorf("search report lacks %q:\n%s", want, md)
		}
	}
}
