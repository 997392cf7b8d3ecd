package controller

import (
	"fmt"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/plugin"
	"github.com/taskaction/executor/pkg/storage"
)

// runtimeError is what gather read of the error.pb a finished attempt's
// runtime may have left under its output prefix (Flyte's contract).
type runtimeError struct {
	// Doc is the document read; its Code is storage.CodeErrorFileNotFound
	// when the runtime left none.
	Doc storage.TaskError
	// StorageErr: blob storage could not say (a system failure).
	StorageErr error
	// OutputsMissing: the pod succeeded without error.pb, the interface
	// declares outputs, and none were written at OutputURI.
	OutputsMissing bool
	OutputURI      string
}

// CodeOutputsNotFound is the error of a success that left no outputs file
// although its interface declares outputs (recoverable, as in Flyte).
const CodeOutputsNotFound = "OutputsNotFound"

// found says whether the runtime wrote an error.pb.
func (e *runtimeError) found() bool {
	return e != nil && e.StorageErr == nil && e.Doc.Code != storage.CodeErrorFileNotFound
}

// withRuntimeError is the finished attempt's observation as the runtime's
// error.pb tells it: a written error.pb fails the attempt, whatever the exit
// code (Flyte's runtime exits 0 after a user error). A non-recoverable error
// is permanent despite retries left; a recoverable one is retried (as a
// system failure when the runtime says SYSTEM). Without error.pb the
// observation stands (the exit-code rules).
func withRuntimeError(obs plugin.Observation, e *runtimeError) plugin.Observation {
	if obs.Finished && obs.Phase == plugin.PhaseSucceeded && e != nil && e.StorageErr == nil && !e.found() && e.OutputsMissing {
		msg := fmt.Sprintf("the task succeeded but wrote no outputs at %s, which its interface declares", e.OutputURI)
		obs.Phase = plugin.PhaseRetryableFailure
		obs.Error = &plugin.ExecError{Code: CodeOutputsNotFound, Kind: flytev1.ErrorKindUser, Message: msg}
		obs.Message = msg
		return obs
	}
	if !obs.Finished || !e.found() {
		return obs
	}
	kind := flytev1.ErrorKindUser
	if e.Doc.Kind == core.ExecutionError_SYSTEM {
		kind = flytev1.ErrorKindSystem
	}
	obs.Phase = plugin.PhasePermanentFailure
	if e.Doc.Recoverable {
		obs.Phase = plugin.PhaseRetryableFailure
	}
	code := e.Doc.Code
	if code == "" {
		code = plugin.CodeUnknownError
	}
	obs.Error = &plugin.ExecError{Code: code, Kind: kind, Message: e.Doc.Message}
	obs.Message = fmt.Sprintf("the task's runtime reported a %s error [%s]: %s", recoverability(e.Doc.Recoverable), code, e.Doc.Message)
	return obs
}

func recoverability(r bool) string {
	if r {
		return "recoverable"
	}
	return "non-recoverable"
}
