package local

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
)

func TestExpand(t *testing.T) {
	vals := map[string]string{"A": "1", "B": "two"}
	lookup := func(k string) (string, bool) { v, ok := vals[k]; return v, ok }
	cases := []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)", "1"},
		{"x$(A)y$(B)z", "x1ytwoz"},
		{"$$(A)", "$(A)"},
		{"$(MISSING)", "$(MISSING)"},
		{"$HOME", "$HOME"},
		{"$(A", "$(A"},
		{"end$", "end$"},
		{"$$$$", "$$"},
	}
	for _, tc := range cases {
		if got := expand(tc.in, lookup); got != tc.want {
			t.Errorf("expand(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func testPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p-0", Namespace: "ns", UID: "u1", Labels: map[string]string{"app": "x"}},
		Spec:       corev1.PodSpec{NodeName: "local", Containers: []corev1.Container{{Name: "task", Image: "busybox"}}},
	}
}

func TestContainerEnv(t *testing.T) {
	yes := true
	refs := map[string]map[string]string{"configmap/cm": {"k": "from-cm", "other": "o"}, "secret/s": {"pw": "secret"}}
	one := func(kind, ns, name, key string) (string, bool, error) {
		if ns != "ns" {
			return "", false, errors.New("wrong namespace " + ns)
		}
		m, ok := refs[kind+"/"+name]
		if !ok {
			return "", false, nil
		}
		v, ok := m[key]
		return v, ok, nil
	}
	all := func(kind, ns, name string) (map[string]string, bool, error) {
		m, ok := refs[kind+"/"+name]
		return m, ok, nil
	}
	field := func(p string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: p}}
	}
	cases := []struct {
		name    string
		c       corev1.Container
		want    []string
		wantErr string
	}{
		{name: "plain and references to earlier values", c: corev1.Container{Env: []corev1.EnvVar{
			{Name: "A", Value: "a"}, {Name: "B", Value: "$(A)-b"}, {Name: "PATH", Value: "/pod/bin"},
		}}, want: []string{"HOME=/h", "PATH=/pod/bin", "A=a", "B=a-b"}},
		{name: "downward API", c: corev1.Container{Env: []corev1.EnvVar{
			{Name: "N", ValueFrom: field("metadata.name")}, {Name: "NS", ValueFrom: field("metadata.namespace")},
			{Name: "L", ValueFrom: field("metadata.labels['app']")}, {Name: "IP", ValueFrom: field("status.podIP")},
			{Name: "NODE", ValueFrom: field("spec.nodeName")},
		}}, want: []string{"HOME=/h", "PATH=/bin", "N=p-0", "NS=ns", "L=x", "IP=127.0.0.1", "NODE=local"}},
		{name: "configmap and secret keys", c: corev1.Container{Env: []corev1.EnvVar{
			{Name: "C", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Key: "k"}}},
			{Name: "S", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "pw"}}},
			{Name: "O", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}, Key: "k", Optional: &yes}}},
		}}, want: []string{"HOME=/h", "PATH=/bin", "C=from-cm", "S=secret"}},
		{name: "missing configmap", c: corev1.Container{Env: []corev1.EnvVar{
			{Name: "C", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "nope"}, Key: "k"}}},
		}}, wantErr: `env C: key "k" of configmap "nope" not found`},
		{name: "envFrom with prefix, env wins", c: corev1.Container{
			EnvFrom: []corev1.EnvFromSource{{Prefix: "P_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}},
			Env:     []corev1.EnvVar{{Name: "P_k", Value: "env"}},
		}, want: []string{"HOME=/h", "PATH=/bin", "P_k=env", "P_other=o"}},
		{name: "resource limits", c: corev1.Container{
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("64Mi")}},
			Env: []corev1.EnvVar{
				{Name: "CPU", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
				{Name: "MEM", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}},
			},
		}, want: []string{"HOME=/h", "PATH=/bin", "CPU=2", "MEM=67108864"}},
		{name: "unsupported field", c: corev1.Container{Env: []corev1.EnvVar{{Name: "X", ValueFrom: field("spec.bogus")}}},
			wantErr: `env X: fieldRef "spec.bogus" is not supported`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod()
			got, err := containerEnv(pod, &tc.c, map[string]string{"PATH": "/bin", "HOME": "/h"}, one, all)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("env = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestArgv(t *testing.T) {
	env := []string{"GREETING=hello"}
	cases := []struct {
		c       corev1.Container
		want    []string
		wantErr bool
	}{
		{c: corev1.Container{Command: []string{"sh", "-c"}, Args: []string{"echo $(GREETING) $GREETING"}}, want: []string{"sh", "-c", "echo hello $GREETING"}},
		{c: corev1.Container{Args: []string{"echo", "x"}}, want: []string{"echo", "x"}},
		{c: corev1.Container{Name: "c", Image: "img"}, wantErr: true},
	}
	for i, tc := range cases {
		got, err := argv(&tc.c, env)
		if (err != nil) != tc.wantErr || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%d: argv = %q, %v; want %q, error %v", i, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestPodStatus(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	running := containerState{Name: "a", Image: "i", PID: 42, Started: t0}
	ok := containerState{Name: "a", Image: "i", PID: 42, Started: t0, Finished: t1, ExitCode: 0, Reason: "Completed"}
	bad := containerState{Name: "b", Image: "i", PID: 43, Started: t0, Finished: t1, ExitCode: 3, Reason: "Error", Message: "boom"}
	waiting := containerState{Name: "a", Image: "i", Waiting: "CreateContainerConfigError", WaitingMessage: "no cm"}
	cases := []struct {
		name   string
		states []containerState
		phase  corev1.PodPhase
		ready  corev1.ConditionStatus
		reason string
	}{
		{"waiting", []containerState{waiting}, corev1.PodPending, corev1.ConditionFalse, "ContainersNotReady"},
		{"running", []containerState{running}, corev1.PodRunning, corev1.ConditionTrue, ""},
		{"succeeded", []containerState{ok}, corev1.PodSucceeded, corev1.ConditionFalse, "PodCompleted"},
		{"failed", []containerState{ok, bad}, corev1.PodFailed, corev1.ConditionFalse, "PodCompleted"},
		{"one still running", []containerState{running, bad}, corev1.PodRunning, corev1.ConditionFalse, "ContainersNotReady"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := podStatus(corev1.PodStatus{}, 1, tc.states, t1)
			if st.Phase != tc.phase {
				t.Errorf("phase %s, want %s", st.Phase, tc.phase)
			}
			for _, typ := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
				c := cond(st, typ)
				if c == nil || c.Status != tc.ready || c.Reason != tc.reason {
					t.Errorf("%s = %+v, want %s/%q", typ, c, tc.ready, tc.reason)
				}
			}
			if c := cond(st, corev1.PodScheduled); c == nil || c.Status != corev1.ConditionTrue {
				t.Errorf("PodScheduled = %+v", c)
			}
			if st.StartTime == nil || !st.StartTime.Time.Equal(t1) || st.PodIP != loopbackIP || st.HostIP != loopbackIP {
				t.Errorf("startTime %v podIP %q hostIP %q", st.StartTime, st.PodIP, st.HostIP)
			}
			if len(st.ContainerStatuses) != len(tc.states) {
				t.Fatalf("%d container statuses", len(st.ContainerStatuses))
			}
		})
	}

	st := podStatus(corev1.PodStatus{}, 1, []containerState{ok, bad}, t1)
	b := st.ContainerStatuses[1]
	if term := b.State.Terminated; term == nil || term.ExitCode != 3 || term.Reason != "Error" || term.Message != "boom" ||
		!term.StartedAt.Time.Equal(t0) || !term.FinishedAt.Time.Equal(t1) || term.ContainerID != "local://43" {
		t.Errorf("terminated = %+v", b.State.Terminated)
	}
	r := podStatus(corev1.PodStatus{}, 1, []containerState{running}, t0).ContainerStatuses[0]
	if r.State.Running == nil || !r.Ready || r.Started == nil || !*r.Started {
		t.Errorf("running = %+v", r)
	}
	w := podStatus(corev1.PodStatus{}, 1, []containerState{waiting}, t0).ContainerStatuses[0]
	if w.State.Waiting == nil || w.State.Waiting.Reason != "CreateContainerConfigError" || w.State.Waiting.Message != "no cm" {
		t.Errorf("waiting = %+v", w)
	}

	// What was recorded stays: the start time and when an unchanged condition became so.
	first := podStatus(corev1.PodStatus{}, 1, []containerState{running}, t0)
	later := podStatus(first, 1, []containerState{ok}, t1)
	if !later.StartTime.Time.Equal(t0) {
		t.Errorf("startTime moved to %v", later.StartTime)
	}
	if c := cond(later, corev1.PodScheduled); !c.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("PodScheduled moved to %v", c.LastTransitionTime)
	}
	if c := cond(later, corev1.PodReady); !c.LastTransitionTime.Time.Equal(t1) {
		t.Errorf("Ready changed but kept %v", c.LastTransitionTime)
	}
}

func cond(st corev1.PodStatus, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == typ {
			return &st.Conditions[i]
		}
	}
	return nil
}

func TestTerminationMessage(t *testing.T) {
	fallback := corev1.TerminationMessageFallbackToLogsOnError
	long := strings.Repeat("x", 5000)
	var lines strings.Builder
	for i := range 100 {
		lines.WriteString("line " + string(rune('a'+i%26)) + "\n")
	}
	cases := []struct {
		name      string
		file, log string
		policy    corev1.TerminationMessagePolicy
		code      int32
		want      string
	}{
		{"file wins", "from file", "log", fallback, 3, "from file"},
		{"file is capped", long, "", fallback, 0, long[:4096]},
		{"fallback on failure", "", "hi\n", fallback, 3, "hi\n"},
		{"no fallback on success", "", "hi\n", fallback, 0, ""},
		{"no fallback with File policy", "", "hi\n", corev1.TerminationMessageReadFile, 3, ""},
		{"fallback keeps the last 2048 bytes", "", long, fallback, 1, long[:2048]},
		{"fallback keeps the last 80 lines", "", lines.String(), fallback, 1, strings.Join(strings.SplitAfter(lines.String(), "\n")[20:], "")},
	}
	for _, tc := range cases {
		if got := terminationMessage([]byte(tc.file), []byte(tc.log), tc.policy, tc.code); got != tc.want {
			t.Errorf("%s: got %d bytes %q..., want %d bytes", tc.name, len(got), head(got), len(tc.want))
		}
	}
}

func head(s string) string {
	if len(s) > 20 {
		return s[:20]
	}
	return s
}

func TestLastLines(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc", 2, "b\nc"},
		{"a\nb\n", 5, "a\nb\n"},
		{"a\nb\n", 0, ""},
		{"", 3, ""},
	}
	for _, tc := range cases {
		if got := string(lastLines([]byte(tc.in), tc.n)); got != tc.want {
			t.Errorf("lastLines(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func TestAddresses(t *testing.T) {
	for in, want := range map[string]string{":8081": "127.0.0.1:8081", "0.0.0.0:1": "0.0.0.0:1", "0": "0", "": ""} {
		if got := loopback(in); got != want {
			t.Errorf("loopback(%q) = %q, want %q", in, got, want)
		}
	}
	cases := []struct {
		url   string
		addr  string
		local bool
	}{
		{"http://localhost:8090", "127.0.0.1:8090", true},
		{"http://127.0.0.1:18094", "127.0.0.1:18094", true},
		{"http://localhost", "127.0.0.1:80", true},
		{"http://events.example.com:8090", "", false},
	}
	for _, tc := range cases {
		addr, local, err := localAddr(tc.url)
		if err != nil || addr != tc.addr || local != tc.local {
			t.Errorf("localAddr(%q) = %q, %v, %v", tc.url, addr, local, err)
		}
	}
}

func TestChecks(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	err = checkPorts([]Service{{Name: "probes", Addr: "127.0.0.1:0"}, {Name: "events service", Addr: ln.Addr().String()}})
	if want := "port " + port + " (events service) is already in use"; err == nil || err.Error() != want {
		t.Errorf("checkPorts = %v, want %q", err, want)
	}
	if err := checkPorts([]Service{{Name: "metrics", Addr: "0"}}); err != nil {
		t.Errorf("disabled address checked: %v", err)
	}

	empty := t.TempDir()
	t.Setenv("KUBEBUILDER_ASSETS", "")
	_, err = checkBinaries(empty)
	if want := "kube-apiserver not found in " + filepath.Join(empty, "bin", "k8s") + ": run `make envtest`"; err == nil || err.Error() != want {
		t.Errorf("checkBinaries = %v, want %q", err, want)
	}

	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkWritable(filepath.Join(file, "data")); err == nil || !strings.Contains(err.Error(), "data directory "+filepath.Join(file, "data")) {
		t.Errorf("checkWritable under a file = %v", err)
	}
	if err := checkWritable(t.TempDir()); err != nil {
		t.Errorf("checkWritable = %v", err)
	}
}

func TestLoadSamples(t *testing.T) {
	samples, err := LoadSamples(filepath.Join("..", "..", "config", "samples"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*sample{}
	for _, s := range samples {
		got[s.ta.Name] = s
		if s.ta.Namespace != DemoNamespace {
			t.Errorf("%s in namespace %q", s.ta.Name, s.ta.Namespace)
		}
	}
	if s := got["exit-3"]; s == nil || !s.wantFailed || s.attempts != 3 {
		t.Errorf("exit-3 = %+v, want failed after 3 attempts", s)
	}
	if s := got["hello"]; s == nil || s.wantFailed || s.cacheHit {
		t.Errorf("hello = %+v", s)
	}
	if s := got["cached-again"]; s == nil || !s.cacheHit || s.after != "cached" || s.ta.Spec.CacheKey != got["cached"].ta.Spec.CacheKey {
		t.Errorf("cached-again = %+v", s)
	}

	// The table's verdicts.
	now := time.Now()
	done := func(s *sample, typ, reason string, attempts uint32, cache flytev1.CacheStatus) {
		s.applied = true
		s.ta.CreationTimestamp = metav1.NewTime(now.Add(-5 * time.Second))
		s.ta.Status = flytev1.TaskActionStatus{Attempts: attempts, CacheStatus: cache,
			Conditions: []metav1.Condition{{Type: typ, Status: metav1.ConditionTrue, Reason: reason}}}
	}
	for _, s := range samples {
		s.applied = false
	}
	if _, finished, bad := demoTable(samples, now); finished || len(bad) > 0 {
		t.Errorf("nothing applied: done %v bad %v", finished, bad)
	}
	done(got["hello"], flytev1.ConditionSucceeded, flytev1.ReasonCompleted, 1, flytev1.CacheDisabled)
	done(got["exit-3"], flytev1.ConditionFailed, flytev1.ReasonPermanentFailure, 3, flytev1.CacheDisabled)
	done(got["cached"], flytev1.ConditionSucceeded, flytev1.ReasonCompleted, 1, flytev1.CachePopulated)
	done(got["cached-again"], flytev1.ConditionSucceeded, flytev1.ReasonCompleted, 1, flytev1.CacheHit)
	done(got["flyte-run-a0"], flytev1.ConditionSucceeded, flytev1.ReasonCompleted, 1, flytev1.CacheDisabled)
	done(got["nap"], flytev1.ConditionSucceeded, flytev1.ReasonCompleted, 1, flytev1.CacheDisabled)
	table, finished, bad := demoTable(samples, now)
	if !finished || len(bad) > 0 {
		t.Errorf("all as expected: done %v bad %v\n%s", finished, bad, table)
	}
	if !strings.Contains(table, "exit-3") || !strings.Contains(table, "Failed/PermanentFailure") || !strings.Contains(table, "5s") {
		t.Errorf("table:\n%s", table)
	}
	done(got["cached-again"], flytev1.ConditionSucceeded, flytev1.ReasonCompleted, 1, flytev1.CacheMiss)
	done(got["exit-3"], flytev1.ConditionFailed, flytev1.ReasonPermanentFailure, 1, flytev1.CacheDisabled)
	if _, finished, bad := demoTable(samples, now); !finished || len(bad) != 2 {
		t.Errorf("a miss and too few attempts: bad = %q", bad)
	}
}
