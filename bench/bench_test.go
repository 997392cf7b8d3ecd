package main

import (
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/taskaction/executor/gen/flyteidl2/workflow"
)

func TestParseProm(t *testing.T) {
	in := `# HELP apiserver_request_total x
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",group="",resource="pods",subresource="",verb="POST",version="v1"} 12
apiserver_request_total{code="200",group="flyte.org",resource="taskactions",subresource="status",verb="PATCH",version="v1"} 3
apiserver_request_total{code="200",group="flyte.org",resource="taskactions",subresource="status",verb="PATCH",version="v1",weird="a\"b,c=d"} 1
process_cpu_seconds_total 4.5
`
	ss := parseProm([]byte(in))
	got := counters(ss, "apiserver_request_total", apiserverKey)
	if got["POST pods 201"] != 12 || got["PATCH taskactions.flyte.org/status 200"] != 4 {
		t.Fatalf("counters: %v", got)
	}
	if v := value(ss, "process_cpu_seconds_total"); v != 4.5 {
		t.Fatalf("process_cpu_seconds_total = %v", v)
	}
	if ss[2].labels["weird"] != `a"b,c=d` {
		t.Fatalf("escaped label: %q", ss[2].labels["weird"])
	}
}

func TestWantFail(t *testing.T) {
	for _, tc := range []struct {
		n    int
		f    float64
		want int
	}{{2000, 0.1, 200}, {200, 0.1, 20}, {100, 0, 0}, {100, 1, 100}, {7, 0.5, 3}} {
		got := 0
		for i := range tc.n {
			if wantFail(i, tc.f) {
				got++
			}
		}
		if got != tc.want {
			t.Errorf("n=%d f=%v: %d failures, want %d", tc.n, tc.f, got, tc.want)
		}
	}
}

func TestPercentiles(t *testing.T) {
	var v []float64
	for i := 1; i <= 100; i++ {
		v = append(v, float64(i))
	}
	p := percentiles(v)
	if p.P50 != 50 || p.P90 != 90 || p.P99 != 99 || p.Max != 100 || p.Count != 100 {
		t.Fatalf("%+v", p)
	}
	if p := percentiles(nil); p.Count != 0 {
		t.Fatalf("%+v", p)
	}
}

func TestCountEvents(t *testing.T) {
	req := &workflow.RecordRequest{Events: []*workflow.ActionEvent{{}, {}, {}}}
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"Content-Type": []string{"application/proto"}}
	if n, ok := countEvents(h, b); !ok || n != 3 {
		t.Fatalf("countEvents = %d, %v", n, ok)
	}
	if _, ok := countEvents(http.Header{"Content-Type": []string{"text/plain"}}, b); ok {
		t.Fatal("decoded an unknown content type")
	}
}

func TestReportWrite(t *testing.T) {
	dir := t.TempDir()
	r := &Report{Params: Params{N: 3}, Modes: []*ModeResult{
		{Mode: "floor", N: 3, Succeeded: 3, Completions: []float64{1, 2, 3}, Controller: requestTable(map[string]float64{"create pods 201": 3}, 3)},
		{Mode: "executor", N: 3, Succeeded: 2, Failed: 1, Completions: []float64{1.5, 2.5, 4}},
	}}
	paths, err := r.Write(dir, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 3 {
		t.Fatal(paths)
	}
	md, _ := os.ReadFile(paths[1])
	if !strings.Contains(string(md), "executor ÷ floor") || !strings.Contains(string(md), "| create pods 201 | 3 | 1.000 |") {
		t.Fatalf("markdown:\n%s", md)
	}
	if st, err := os.Stat(filepath.Join(dir, filepath.Base(paths[2]))); err != nil || st.Size() == 0 {
		t.Fatalf("png: %v", err)
	}
	if math.Abs(r.Modes[0].Controller.TotalPerTA-1) > 1e-9 {
		t.Fatal(r.Modes[0].Controller.TotalPerTA)
	}
}
