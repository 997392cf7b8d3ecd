package ray

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxJobNameLength is KubeRay's limit on a RayJob's name: its RayCluster is
// named "<job>-<5 random characters>" and must leave room for the longest
// service suffix ("-serve-svc") within 63 characters. A longer name, or one
// that is not a DNS-1035 label, makes KubeRay fail the job's validation.
const MaxJobNameLength = 47

// JobName is the RayJob of attempt (1-based) of the TaskAction named
// taskActionName: "<name>-<attempt-1>" as Flyte names it when that is a
// DNS-1035 label of at most 47 characters. Otherwise the name is made one,
// stable per attempt: lower-cased, characters a label cannot hold turned into
// '-', shortened, starting with a letter, with 8 hex digits of a hash of the
// TaskAction's name before the attempt suffix so that different TaskActions
// do not collide. Attempts below 1 count as 1.
func JobName(taskActionName string, attempt int32) string {
	suffix := "-" + strconv.Itoa(int(max(attempt, 1)-1))
	if name := taskActionName + suffix; len(name) <= MaxJobNameLength && len(validation.IsDNS1035Label(name)) == 0 {
		return name
	}
	base := labelChars(taskActionName)
	if base == "" || base[0] < 'a' || base[0] > 'z' {
		base = "r" + base
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(taskActionName))
	tail := fmt.Sprintf("-%08x%s", h.Sum32(), suffix)
	if keep := MaxJobNameLength - len(tail); len(base) > keep {
		base = base[:keep]
	}
	return strings.TrimRight(base, "-") + tail
}

// labelChars lower-cases s, turns every character a DNS label cannot hold
// into '-', and trims '-' from both ends.
func labelChars(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			b[i] = '-'
		}
	}
	return strings.Trim(string(b), "-")
}
