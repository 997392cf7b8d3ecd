// Package wire_test pins the wire bytes of the Flyte 2 messages the executor
// sends and reads. Each expected value is assembled here field by field from
// Flyte's field numbers and wire types, independently of the generated code,
// so a wrong field number or type in proto/flyteidl2 fails a test.
package wire_test

import (
	"encoding/hex"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	cachepb "github.com/taskaction/executor/gen/flyteidl2/cacheservice"
	cachev2 "github.com/taskaction/executor/gen/flyteidl2/cacheservice/v2"
	"github.com/taskaction/executor/gen/flyteidl2/common"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/gen/flyteidl2/task"
	"github.com/taskaction/executor/gen/flyteidl2/workflow"
)

// msg concatenates encoded fields into a message body.
func msg(fields ...[]byte) []byte {
	var b []byte
	for _, f := range fields {
		b = append(b, f...)
	}
	return b
}

// str encodes a length-delimited field holding a string.
func str(num protowire.Number, s string) []byte {
	return sub(num, []byte(s))
}

// sub encodes a length-delimited field (a string, bytes or a nested message).
func sub(num protowire.Number, body []byte) []byte {
	b := protowire.AppendTag(nil, num, protowire.BytesType)
	return protowire.AppendBytes(b, body)
}

// varint encodes a varint field (integers, bools, enums).
func varint(num protowire.Number, v uint64) []byte {
	b := protowire.AppendTag(nil, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// timestamp encodes a google.protobuf.Timestamp body {seconds 1, nanos 2}.
func timestamp(seconds, nanos uint64) []byte {
	return msg(varint(1, seconds), varint(2, nanos))
}

func marshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatalf("marshal %T: %v", m, err)
	}
	return b
}

func assertBytes(t *testing.T, m proto.Message, want []byte) {
	t.Helper()
	got := marshal(t, m)
	if hex.EncodeToString(got) != hex.EncodeToString(want) {
		t.Fatalf("%T wire bytes differ\n got: %x\nwant: %x", m, got, want)
	}
	back := m.ProtoReflect().New().Interface()
	if err := proto.Unmarshal(want, back); err != nil {
		t.Fatalf("unmarshal expected bytes into %T: %v", m, err)
	}
	if !proto.Equal(back, m) {
		t.Fatalf("%T decoded from the expected bytes differs from the original", m)
	}
}

// runID is {org 1, project 2, domain 3, name 4}.
var runIDBody = msg(str(1, "org1"), str(2, "proj"), str(3, "dev"), str(4, "r1"))

// actionIDBody is {run 1, name 2}.
var actionIDBody = msg(sub(1, runIDBody), str(2, "a0"))

func actionID() *common.ActionIdentifier {
	return &common.ActionIdentifier{
		Run:  &common.RunIdentifier{Org: "org1", Project: "proj", Domain: "dev", Name: "r1"},
		Name: "a0",
	}
}

func TestActionEventWireBytes(t *testing.T) {
	ev := &workflow.ActionEvent{
		Id:          actionID(),
		Attempt:     2,
		Phase:       common.ActionPhase_ACTION_PHASE_FAILED,
		Version:     3,
		UpdatedTime: &timestamppb.Timestamp{Seconds: 1700000000, Nanos: 5},
		ErrorInfo:   &workflow.ErrorInfo{Message: "[OOMKilled] out of memory", Kind: workflow.ErrorInfo_KIND_SYSTEM},
		LogInfo: []*core.TaskLog{{
			Uri: "https://logs/p", Name: "Kubernetes Logs", MessageFormat: core.TaskLog_JSON,
			ShowWhilePending: true, LinkType: core.TaskLog_DASHBOARD,
		}},
		LogContext: &core.LogContext{
			Pods: []*core.PodLogContext{{
				Namespace: "ns", PodName: "r1-a0-1",
				Containers:           []*core.ContainerContext{{ContainerName: "main"}},
				PrimaryContainerName: "main",
			}},
			PrimaryPodName: "r1-a0-1",
		},
		Cluster:     "c1",
		Outputs:     &task.OutputReferences{OutputUri: "s3://b/ab/r1/a0/2"},
		CacheStatus: core.CatalogCacheStatus_CACHE_EVICTED,
		ClusterEvents: []*workflow.ClusterEvent{{
			OccurredAt: &timestamppb.Timestamp{Seconds: 10},
			Message:    "pulled", Type: workflow.ClusterEvent_TYPE_WARNING, Reason: "Pulled",
			SourceComponent: "kubelet", Count: 4,
		}},
		ReportedTime: &timestamppb.Timestamp{Seconds: 1700000001},
		CacheMetadata: &common.CacheMetadata{SourceActionAttempt: &common.ActionAttemptIdentifier{
			ActionId: actionID(), Attempt: 1,
		}},
	}
	want := msg(
		sub(1, actionIDBody),             // id
		varint(2, 2),                     // attempt
		varint(3, 6),                     // phase ACTION_PHASE_FAILED
		varint(4, 3),                     // version
		sub(6, timestamp(1700000000, 5)), // updated_time
		sub(8, msg(str(1, "[OOMKilled] out of memory"), varint(2, 2))),                                             // error_info {message, kind SYSTEM}
		sub(9, msg(str(1, "https://logs/p"), str(2, "Kubernetes Logs"), varint(3, 2), varint(5, 1), varint(7, 1))), // log_info
		sub(10, msg( // log_context
			sub(1, msg(str(1, "ns"), str(2, "r1-a0-1"), sub(3, str(1, "main")), str(4, "main"))), // pods
			str(2, "r1-a0-1"), // primary_pod_name
		)),
		str(11, "c1"),                        // cluster
		sub(12, str(1, "s3://b/ab/r1/a0/2")), // outputs.output_uri
		varint(13, 7),                        // cache_status CACHE_EVICTED
		sub(14, msg(sub(1, varint(1, 10)), str(2, "pulled"), varint(3, 2), str(4, "Pulled"), str(5, "kubelet"), varint(6, 4))), // cluster_events
		sub(15, varint(1, 1700000001)),                           // reported_time
		sub(16, sub(1, msg(sub(1, actionIDBody), varint(2, 1)))), // cache_metadata.source_action_attempt
	)
	assertBytes(t, ev, want)

	req := &workflow.RecordRequest{Events: []*workflow.ActionEvent{ev}}
	assertBytes(t, req, sub(1, want)) // events = 1
}

func TestActionPhaseNumbers(t *testing.T) {
	want := map[common.ActionPhase]int32{
		common.ActionPhase_ACTION_PHASE_UNSPECIFIED:           0,
		common.ActionPhase_ACTION_PHASE_QUEUED:                1,
		common.ActionPhase_ACTION_PHASE_WAITING_FOR_RESOURCES: 2,
		common.ActionPhase_ACTION_PHASE_INITIALIZING:          3,
		common.ActionPhase_ACTION_PHASE_RUNNING:               4,
		common.ActionPhase_ACTION_PHASE_SUCCEEDED:             5,
		common.ActionPhase_ACTION_PHASE_FAILED:                6,
		common.ActionPhase_ACTION_PHASE_ABORTED:               7,
		common.ActionPhase_ACTION_PHASE_TIMED_OUT:             8,
		common.ActionPhase_ACTION_PHASE_PAUSED:                9,
		common.ActionPhase_ACTION_PHASE_RECOVERED:             10,
	}
	for p, n := range want {
		if int32(p) != n {
			t.Errorf("%s = %d, want %d", p, int32(p), n)
		}
	}
	if got := len(common.ActionPhase_name); got != len(want) {
		t.Errorf("ActionPhase has %d values, want %d", got, len(want))
	}
}

func TestCachePutRequestWireBytes(t *testing.T) {
	req := &cachev2.PutCacheRequest{
		BaseRequest: &cachepb.PutCacheRequest{
			Key: "k1",
			Output: &cachepb.CachedOutput{
				Output: &cachepb.CachedOutput_OutputUri{OutputUri: "s3://b/o/outputs.pb"},
				Metadata: &cachepb.Metadata{
					SourceIdentifier: &core.Identifier{
						ResourceType: core.ResourceType_TASK, Project: "proj", Domain: "dev",
						Name: "t", Version: "v1", Org: "org1",
					},
					KeyMap:        &cachepb.KeyMapMetadata{Values: map[string]string{"b": "2", "a": "1"}},
					CreatedAt:     &timestamppb.Timestamp{Seconds: 7},
					LastUpdatedAt: &timestamppb.Timestamp{Seconds: 8},
				},
			},
			Overwrite: &cachepb.OverwriteOutput{Overwrite: true, DeleteBlob: true, MaxAge: durationpb.New(90e9)},
		},
		Identifier: &cachev2.Identifier{Org: "org1", Project: "proj", Domain: "dev"},
	}
	mapEntry := func(k, v string) []byte { return sub(1, msg(str(1, k), str(2, v))) }
	base := msg(
		str(1, "k1"), // key
		sub(2, msg( // output
			sub(3, msg( // metadata
				sub(1, msg(varint(1, 1), str(2, "proj"), str(3, "dev"), str(4, "t"), str(5, "v1"), str(6, "org1"))), // source_identifier
				sub(2, msg(mapEntry("a", "1"), mapEntry("b", "2"))),                                                 // key_map.values
				sub(3, varint(1, 7)), // created_at
				sub(4, varint(1, 8)), // last_updated_at
			)),
			str(2, "s3://b/o/outputs.pb"), // output_uri (a oneof member: Go writes those last)
		)),
		sub(3, msg(varint(1, 1), varint(2, 1), sub(3, varint(1, 90)))), // overwrite {overwrite, delete_blob, max_age}
	)
	want := msg(
		sub(1, base), // base_request
		sub(2, msg(str(1, "org1"), str(2, "proj"), str(3, "dev"))), // identifier
	)
	assertBytes(t, req, want)
}

func TestCacheReservationRequestWireBytes(t *testing.T) {
	req := &cachev2.GetOrExtendReservationRequest{
		BaseRequest: &cachepb.GetOrExtendReservationRequest{
			Key: "k1", OwnerId: "ns/a0", HeartbeatInterval: durationpb.New(10e9),
		},
		Identifier: &cachev2.Identifier{Org: "org1", Project: "proj", Domain: "dev"},
	}
	want := msg(
		sub(1, msg(str(1, "k1"), str(2, "ns/a0"), sub(3, varint(1, 10)))),
		sub(2, msg(str(1, "org1"), str(2, "proj"), str(3, "dev"))),
	)
	assertBytes(t, req, want)

	resp := &cachepb.GetOrExtendReservationResponse{Reservation: &cachepb.Reservation{
		Key: "k1", OwnerId: "ns/a0", HeartbeatInterval: durationpb.New(10e9), ExpiresAt: &timestamppb.Timestamp{Seconds: 99},
	}}
	assertBytes(t, resp, sub(1, msg(str(1, "k1"), str(2, "ns/a0"), sub(3, varint(1, 10)), sub(4, varint(1, 99)))))
}

func TestTaskTemplateWireBytes(t *testing.T) {
	tmpl := &core.TaskTemplate{
		Id:   &core.Identifier{ResourceType: core.ResourceType_TASK, Project: "proj", Domain: "dev", Name: "t", Version: "v1", Org: "org1"},
		Type: "python",
		Metadata: &core.TaskMetadata{
			Discoverable:         true,
			Timeout:              durationpb.New(60e9),
			Retries:              &core.RetryStrategy{Retries: 3},
			DiscoveryVersion:     "1.0",
			InterruptibleValue:   &core.TaskMetadata_Interruptible{Interruptible: true},
			CacheSerializable:    true,
			PodTemplateName:      "tpl",
			CacheIgnoreInputVars: []string{"x"},
		},
		Interface: &core.TypedInterface{Inputs: &core.VariableMap{Variables: []*core.VariableEntry{{
			Key: "n", Value: &core.Variable{Type: &core.LiteralType{Type: &core.LiteralType_Simple{Simple: core.SimpleType_INTEGER}}},
		}}}},
		Target: &core.TaskTemplate_Container{Container: &core.Container{
			Image: "img", Command: []string{"sh"}, Args: []string{"-c", "x"},
			Resources: &core.Resources{
				Requests: []*core.Resources_ResourceEntry{{Name: core.Resources_CPU, Value: "1"}},
				Limits:   []*core.Resources_ResourceEntry{{Name: core.Resources_MEMORY, Value: "1Gi"}},
			},
			Env: []*core.KeyValuePair{{Key: "A", Value: "b"}},
		}},
		SecurityContext: &core.SecurityContext{
			RunAs:   &core.Identity{K8SServiceAccount: "sa"},
			Secrets: []*core.Secret{{Group: "g", Key: "k", MountRequirement: core.Secret_ENV_VAR, EnvVar: "E"}},
		},
		ExtendedResources: &core.ExtendedResources{
			GpuAccelerator: &core.GPUAccelerator{Device: "nvidia-l4", PartitionSizeValue: &core.GPUAccelerator_PartitionSize{PartitionSize: "1g.5gb"}},
		},
		Config: map[string]string{"z": "1", "a": "2"},
	}
	want := msg(
		sub(1, msg(varint(1, 1), str(2, "proj"), str(3, "dev"), str(4, "t"), str(5, "v1"), str(6, "org1"))), // id
		str(2, "python"), // type
		sub(3, msg( // metadata
			varint(1, 1),          // discoverable
			sub(4, varint(1, 60)), // timeout
			sub(5, varint(5, 3)),  // retries.retries
			str(6, "1.0"),         // discovery_version
			varint(9, 1),          // cache_serializable
			str(12, "tpl"),        // pod_template_name
			str(13, "x"),          // cache_ignore_input_vars
			varint(8, 1),          // interruptible (a oneof member: Go writes those last)
		)),
		sub(4, sub(1, sub(1, msg(str(1, "n"), sub(2, sub(1, varint(1, 1))))))), // interface.inputs.variables[0]{key, value.type.simple INTEGER}
		sub(8, msg( // security_context
			sub(1, str(2, "sa")), // run_as.k8s_service_account
			sub(2, msg(str(1, "g"), str(3, "k"), varint(4, 1), str(5, "E"))), // secrets
		)),
		sub(9, sub(1, msg(str(1, "nvidia-l4"), str(3, "1g.5gb")))), // extended_resources.gpu_accelerator
		sub(16, msg(str(1, "a"), str(2, "2"))),                     // config entries, sorted by key
		sub(16, msg(str(1, "z"), str(2, "1"))),
		sub(6, msg( // container (the target oneof: Go writes it last)
			str(1, "img"), str(2, "sh"), str(3, "-c"), str(3, "x"),
			sub(4, msg(sub(1, msg(varint(1, 1), str(2, "1"))), sub(2, msg(varint(1, 3), str(2, "1Gi"))))), // resources
			sub(5, msg(str(1, "A"), str(2, "b"))), // env
		)),
	)
	assertBytes(t, tmpl, want)

	pod := &core.TaskTemplate{Target: &core.TaskTemplate_K8SPod{K8SPod: &core.K8SPod{
		Metadata:             &core.K8SObjectMetadata{Labels: map[string]string{"l": "v"}, Annotations: map[string]string{"a": "w"}},
		PrimaryContainerName: "main",
	}}}
	assertBytes(t, pod, sub(17, msg(
		sub(1, msg(sub(1, msg(str(1, "l"), str(2, "v"))), sub(2, msg(str(1, "a"), str(2, "w"))))),
		str(4, "main"),
	)))
}

func TestErrorDocumentWireBytes(t *testing.T) {
	doc := &core.ErrorDocument{Error: &core.ContainerError{
		Code: "USER:ValueError", Message: "bad", Kind: core.ContainerError_RECOVERABLE, Origin: core.ExecutionError_USER,
	}}
	assertBytes(t, doc, sub(1, msg(str(1, "USER:ValueError"), str(2, "bad"), varint(3, 1), varint(4, 1))))
}

func TestConditionActionWireBytes(t *testing.T) {
	c := &workflow.ConditionAction{
		Name:       "approve",
		Type:       &core.LiteralType{Type: &core.LiteralType_Simple{Simple: core.SimpleType_BOOLEAN}},
		Prompt:     "ok?",
		PromptType: workflow.ConditionPromptType_CONDITION_PROMPT_TYPE_MARKDOWN,
		Timeout:    durationpb.New(300e9),
	}
	assertBytes(t, c, msg(str(1, "approve"), sub(6, varint(1, 4)), str(7, "ok?"), varint(9, 2), sub(10, varint(1, 300))))
}

func TestLiteralMapReadsRuntimeInputs(t *testing.T) {
	// The runtime writes its inputs as repeated {name 1, value 2}; that is the
	// wire form of a map entry, so the file decodes as a LiteralMap.
	lit := msg(sub(1, sub(1, varint(1, 42)))) // scalar.primitive.integer
	file := msg(sub(1, msg(str(1, "n"), sub(2, lit))), sub(2, msg(str(1, "ctx"), str(2, "v"))))
	var m core.LiteralMap
	if err := proto.Unmarshal(file, &m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetLiterals()["n"].GetScalar().GetPrimitive().GetInteger(); got != 42 {
		t.Fatalf("n = %d, want 42", got)
	}
}
