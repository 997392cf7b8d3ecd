package task

import (
	"strconv"
	"strings"

	flytev1 "github.com/taskaction/executor/api/v1"
)

// OutputPrefix is where attempt (1-based) of ta writes its outputs:
// "<runOutputBase>/<actionName>/<attempt>". Empty when the run has no output base.
func OutputPrefix(ta *flytev1.TaskAction, attempt int32) string {
	base := strings.TrimRight(ta.Spec.RunOutputBase, "/")
	if base == "" {
		return ""
	}
	return base + "/" + ta.Spec.ActionName + "/" + strconv.Itoa(int(max(attempt, 1)))
}

// OutputURI is the outputs file of attempt (1-based) of ta, reported on events.
func OutputURI(ta *flytev1.TaskAction, attempt int32) string {
	p := OutputPrefix(ta, attempt)
	if p == "" {
		return ""
	}
	return p + "/outputs.pb"
}

// RawOutputDataPrefix is where the task writes offloaded data (blobs,
// dataframes). It sits under the attempt's output prefix, so each attempt's
// data is kept apart and goes away with it.
func RawOutputDataPrefix(ta *flytev1.TaskAction, attempt int32) string {
	return under(OutputPrefix(ta, attempt), "raw")
}

// CheckpointPrefix is where attempt (1-based) of ta writes checkpoints.
func CheckpointPrefix(ta *flytev1.TaskAction, attempt int32) string {
	return under(OutputPrefix(ta, attempt), "_flytecheckpoints")
}

// PrevCheckpointPrefix is the checkpoint prefix of the attempt before attempt;
// empty on the first attempt, which has nothing to resume from.
func PrevCheckpointPrefix(ta *flytev1.TaskAction, attempt int32) string {
	if attempt <= 1 {
		return ""
	}
	return CheckpointPrefix(ta, attempt-1)
}

// InputPrefix is the directory of the inputs file: inputURI without a trailing
// "/inputs.pb", or else without its last path element.
func InputPrefix(inputURI string) string {
	if p, ok := strings.CutSuffix(inputURI, "/inputs.pb"); ok {
		return p
	}
	rest := inputURI
	start := 0
	if i := strings.Index(rest, "://"); i >= 0 {
		start = i + 3
	}
	i := strings.LastIndex(rest[start:], "/")
	if i < 0 {
		// No path at all ("s3://bucket" or "file"): nothing to strip.
		return inputURI
	}
	return rest[:start+i]
}

func under(prefix, elem string) string {
	if prefix == "" {
		return ""
	}
	return prefix + "/" + elem
}
