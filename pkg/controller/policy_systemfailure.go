package controller

import (
	"fmt"
	"time"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/plugin"
)

// maxBackoff caps every backoff.
const maxBackoff = 5 * time.Minute

// backoff is the wait after the n-th consecutive refusal or failure: base,
// doubling, at most maxBackoff.
func backoff(base time.Duration, n uint32) time.Duration {
	d := base
	for i := uint32(1); i < n && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// afterSystemFailure is the rule for the failures-th consecutive system
// failure of an attempt (cause): past the ceiling the TaskAction ends with
// the error returned; below it the same attempt runs again after wait.
func (d decider) afterSystemFailure(failures uint32, cause *plugin.ExecError) (end *plugin.ExecError, wait time.Duration) {
	if failures > d.MaxSystemFailures {
		return &plugin.ExecError{Code: CodeMaxSystemFailuresExceeded, Kind: flytev1.ErrorKindSystem,
			Message: fmt.Sprintf("failed with a system error %d times in a row; last: [%s] %s", failures, cause.Code, cause.Message)}, 0
	}
	return nil, backoff(d.Backoff, failures)
}
