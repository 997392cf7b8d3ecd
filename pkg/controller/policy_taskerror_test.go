package controller

import (
	"strings"
	"testing"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/storage"
)

func TestMissingOutputsFailRecoverably(t *testing.T) {
	succeeded := plugin.Observation{Phase: plugin.PhaseSucceeded, Finished: true}
	notFound := storage.TaskError{Code: storage.CodeErrorFileNotFound}
	for _, tc := range []struct {
		name string
		e    *runtimeError
		want plugin.Phase
	}{
		{"outputs written", &runtimeError{Doc: notFound}, plugin.PhaseSucceeded},
		{"outputs missing", &runtimeError{Doc: notFound, OutputsMissing: true, OutputURI: "file:///b/o/outputs.pb"}, plugin.PhaseRetryableFailure},
		{"nothing read (typed form)", nil, plugin.PhaseSucceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := withRuntimeError(succeeded, tc.e)
			if got.Phase != tc.want {
				t.Fatalf("phase %s, want %s", got.Phase, tc.want)
			}
			if tc.want == plugin.PhaseRetryableFailure && (got.Error == nil || got.Error.Code != CodeOutputsNotFound ||
				got.Error.Kind != flytev1.ErrorKindUser || !strings.Contains(got.Error.Message, tc.e.OutputURI)) {
				t.Errorf("error %+v, want a USER OutputsNotFound naming %s", got.Error, tc.e.OutputURI)
			}
		})
	}
}
