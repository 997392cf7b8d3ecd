package controller

import (
	"fmt"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
)

// runtimeErrorUnreadable is the verdict when the attempt's object finished
// and blob storage could not say whether the runtime left an error.pb: the
// outcome cannot be known, so the try counts as a system failure.
func runtimeErrorUnreadable(w World, obs plugin.Observation, s attemptState) verdict {
	if e := w.RuntimeError; obs.Finished && e != nil && e.StorageErr != nil {
		return verdict{kind: verdictSystemFailure, state: s, cause: &plugin.ExecError{Code: CodeStorageError, Kind: flytev1.ErrorKindSystem,
			Message: fmt.Sprintf("the attempt's error.pb could not be read: %v", e.StorageErr)}}
	}
	return verdict{}
}

// explained gives a failure that carries no error one: a failure nothing
// explains is not the task's fault.
func explained(obs plugin.Observation) plugin.Observation {
	if obs.Phase.IsTerminal() && obs.Phase != plugin.PhaseSucceeded && obs.Error == nil {
		obs.Error = &plugin.ExecError{Code: plugin.CodeUnknownError, Kind: flytev1.ErrorKindSystem, Message: obs.Message}
	}
	return obs
}

// observationVerdict is what the attempt's observed phase means: a system
// failure, a failure of the task's own (retried while attempts remain), a
// success, an end, or progress (looked at again when the plugin asks).
func observationVerdict(w World, obs plugin.Observation, s attemptState, t transition) verdict {
	switch {
	case obs.Phase == plugin.PhaseRetryableFailure && obs.Error.Kind == flytev1.ErrorKindSystem:
		return verdict{kind: verdictSystemFailure, state: s, cause: obs.Error}
	case obs.Phase == plugin.PhaseRetryableFailure:
		return attemptFailed(w, t)
	case obs.Phase == plugin.PhaseSucceeded:
		return verdict{kind: verdictSucceed, t: t}
	case obs.Phase.IsTerminal():
		return ends(t)
	}
	return verdict{kind: verdictProgress, state: s, t: t, wake: obs.RecheckAfter}
}
