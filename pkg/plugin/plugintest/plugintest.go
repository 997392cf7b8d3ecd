// Package plugintest is what the plugins' tests share, mostly their golden
// tests (pkg/plugin/<engine>/golden_test.go), which compare what a plugin
// builds with what Flyte's own plugin built for the same TaskAction: the
// settings of a Flyte deployment, the parts of a task template as flyte-sdk
// writes them, Flyte's names of phases and log links as the recorded facts
// hold them, and a line diff to show where an object differs; and the check
// of a launch error the unit tests expect. Only tests import it.
//
// Each engine keeps its own builder of the golden TaskAction: the facts of
// each were recorded from TaskActions that differ (namespace, type meta, the
// template's encoding, a root action or not), and must stay as recorded.
package plugintest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/task"
)

// FlyteSettings are the pod settings of a Flyte deployment as its chart
// configures plugins.k8s (what the golden facts were recorded with; an
// engine's test adds its own).
func FlyteSettings() plugin.Settings {
	return plugin.Settings{
		DefaultCPU: "1000m", DefaultMemory: "1024Mi",
		DefaultAnnotations: map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
		DefaultEnvVars: map[string]string{
			"_U_EP_OVERRIDE": "flyte-binary-grpc.flyte.svc.cluster.local:8089", "_U_INSECURE": "true", "_U_USE_ACTIONS": "1",
		},
		InterruptibleTolerations:  []corev1.Toleration{{Key: "cloud.google.com/gke-spot", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		InterruptibleNodeSelector: map[string]string{"cloud.google.com/gke-spot": "true"},
	}
}

// SDKArgs are the arguments flyte-sdk gives its runtime for the task
// instance of module main.
func SDKArgs(instance string) []string {
	return []string{"a0", "--inputs", "{{.input}}", "--outputs-path", "{{.outputPrefix}}", "--version", "v1",
		"--raw-data-path", "{{.rawOutputDataPrefix}}", "--checkpoint-path", "{{.checkpointOutputPrefix}}",
		"--prev-checkpoint", "{{.prevCheckpointPrefix}}", "--run-name", "{{.runName}}", "--name", "{{.actionName}}",
		"--tgz", "s3://flyte-data/code/abc.tgz", "--dest", ".", "--resolver", "flyte._internal.resolvers.default.DefaultTaskResolver",
		"mod", "main", "instance", instance}
}

// TaskID is the identifier of task name, version v1, in flytesnacks'
// development domain.
func TaskID(name string) *core.Identifier {
	return &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "flytesnacks", Domain: "development", Name: name, Version: "v1"}
}

// Res is a template's resource entry.
func Res(n core.Resources_ResourceName, v string) *core.Resources_ResourceEntry {
	return &core.Resources_ResourceEntry{Name: n, Value: v}
}

// Custom is m as flyte-sdk puts it into a template's custom: its JSON form
// as a Struct.
func Custom(t testing.TB, m proto.Message) *structpb.Struct {
	t.Helper()
	b, err := protojson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	s := &structpb.Struct{}
	if err := protojson.Unmarshal(b, s); err != nil {
		t.Fatal(err)
	}
	return s
}

// Struct is m as a Struct (a pod spec, a custom written by hand).
func Struct(t testing.TB, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// FlyteTask is a Flyte-form task of tmpl.
func FlyteTask(t testing.TB, tmpl *core.TaskTemplate) *task.Task {
	t.Helper()
	b, err := proto.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	return &task.Task{Form: task.FormFlyte, Raw: b}
}

// WantUserFailure fails t unless err is a launch error that fails the task
// for good, the user's fault, with code and a message that says contains.
func WantUserFailure(t testing.TB, err error, code, contains string) {
	t.Helper()
	var le *plugin.LaunchError
	if !errors.As(err, &le) || le.Err.Code != code || le.Err.Kind != flytev1.ErrorKindUser || le.Retryable {
		t.Fatalf("err = %v; want a permanent user failure %s", err, code)
	}
	if !strings.Contains(le.Err.Message, contains) {
		t.Errorf("message %q does not say %q", le.Err.Message, contains)
	}
}

// WriteFile writes data to path, its directory created if need be (a test's
// -update).
func WriteFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// FlyteLog is a log link as the recorded facts hold Flyte's.
type FlyteLog struct {
	Name             string `json:"name"`
	URI              string `json:"uri"`
	MessageFormat    string `json:"messageFormat"`
	LinkType         string `json:"linkType"`
	Ready            bool   `json:"ready"`
	ShowWhilePending bool   `json:"showWhilePending"`
	HideOnceFinished bool   `json:"hideOnceFinished"`
	IconURI          string `json:"iconUri"`
}

// FlyteLogOf is l as a FlyteLog.
func FlyteLogOf(l *core.TaskLog) FlyteLog {
	return FlyteLog{Name: l.GetName(), URI: l.GetUri(), MessageFormat: l.GetMessageFormat().String(),
		LinkType: l.GetLinkType().String(), Ready: l.GetReady(), ShowWhilePending: l.GetShowWhilePending(),
		HideOnceFinished: l.GetHideOnceFinished(), IconURI: l.GetIconUri()}
}

// FlytePhases are Flyte's names of the plugins' phases.
var FlytePhases = map[plugin.Phase]string{
	plugin.PhaseQueued: "PhaseQueued", plugin.PhaseInitializing: "PhaseInitializing", plugin.PhaseRunning: "PhaseRunning",
	plugin.PhaseSucceeded: "PhaseSuccess", plugin.PhaseRetryableFailure: "PhaseRetryableFailure",
	plugin.PhasePermanentFailure: "PhasePermanentFailure",
}

// LineDiff shows how got differs from want, line by line ("-" only in
// want, "+" only in got, each with its line number), from a longest common
// subsequence.
func LineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	// lcs[i][j] is the length of the longest common subsequence of w[i:] and g[j:].
	lcs := make([][]int, len(w)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(g)+1)
	}
	for i := len(w) - 1; i >= 0; i-- {
		for j := len(g) - 1; j >= 0; j-- {
			if w[i] == g[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var b strings.Builder
	i, j := 0, 0
	for i < len(w) || j < len(g) {
		switch {
		case i < len(w) && j < len(g) && w[i] == g[j]:
			i, j = i+1, j+1
		case j < len(g) && (i == len(w) || lcs[i][j+1] >= lcs[i+1][j]):
			fmt.Fprintf(&b, "+%4d %s\n", j+1, g[j])
			j++
		default:
			fmt.Fprintf(&b, "-%4d %s\n", i+1, w[i])
			i++
		}
	}
	return b.String()
}
