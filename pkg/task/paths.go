package task

import (
	"hash/fnv"
	"net/url"
	"strconv"
	"strings"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/storage/layout"
)

// The attempt's folders, laid out as Flyte's executor lays them out (the
// files in them are named by pkg/storage/layout): the parent action and
// Flyte's services read outputs at these exact URIs.
const (
	CheckpointsDir  = "_flytecheckpoints"
	shardAlphabet   = "abcdefghijklmnopqrstuvwxyz0123456789"
	shardCount      = uint32(len(shardAlphabet) * len(shardAlphabet))
	noAttemptBefore = 1
)

// Shard is the two-character prefix that spreads a TaskAction's outputs over
// the bucket: FNV-32a of "<namespace>/<name>" modulo 36², as two characters
// of a-z0-9 (first character the outer one).
func Shard(namespace, name string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(namespace + "/" + name))
	i := h.Sum32() % shardCount
	n := uint32(len(shardAlphabet))
	return string([]byte{shardAlphabet[i/n], shardAlphabet[i%n]})
}

// OutputPrefix is where attempt (1-based) of ta writes its outputs:
// runOutputBase's scheme and bucket, then "/<shard>/<runOutputBase path>/<actionName>/<attempt>".
// Empty when the run has no output base (or it is not a URL, which the
// decoder reports).
func OutputPrefix(ta *flytev1.TaskAction, attempt int32) string {
	if ta.Spec.RunOutputBase == "" {
		return ""
	}
	u, err := url.Parse(ta.Spec.RunOutputBase)
	if err != nil {
		return ""
	}
	segments := []string{Shard(ta.Namespace, ta.Name)}
	if rest := strings.Trim(u.Path, "/"); rest != "" {
		segments = append(segments, rest)
	}
	segments = append(segments, ta.Spec.ActionName, strconv.Itoa(int(max(attempt, noAttemptBefore))))
	u.Path = "/" + strings.Join(segments, "/")
	return u.String()
}

// OutputURI is the outputs file of attempt (1-based) of ta, reported on events.
func OutputURI(ta *flytev1.TaskAction, attempt int32) string {
	return layout.Join(OutputPrefix(ta, attempt), layout.OutputsFile)
}

// ErrorURI is the error document a failed attempt (1-based) of ta leaves.
func ErrorURI(ta *flytev1.TaskAction, attempt int32) string {
	return layout.Join(OutputPrefix(ta, attempt), layout.ErrorFile)
}

// RawOutputDataPrefix is where the task writes offloaded data (blobs,
// dataframes): the attempt's output prefix itself, as in Flyte.
func RawOutputDataPrefix(ta *flytev1.TaskAction, attempt int32) string {
	return OutputPrefix(ta, attempt)
}

// CheckpointPrefix is where attempt (1-based) of ta writes checkpoints.
func CheckpointPrefix(ta *flytev1.TaskAction, attempt int32) string {
	return layout.Join(RawOutputDataPrefix(ta, attempt), CheckpointsDir)
}

// PrevCheckpointPrefix is the checkpoint prefix of the attempt before attempt;
// empty on the first attempt, which has nothing to resume from.
func PrevCheckpointPrefix(ta *flytev1.TaskAction, attempt int32) string {
	if attempt <= 1 {
		return ""
	}
	return CheckpointPrefix(ta, attempt-1)
}
