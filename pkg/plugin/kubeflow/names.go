package kubeflow

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/taskaction/executor/pkg/plugin/container"
)

// maxJobNameLen leaves room for the names the operator derives from the
// job's: each replica's pod and Service is "<job>-<type>-<index>", and a
// Service name is a DNS-1035 label of at most 63 characters. The longest
// type is "evaluator"; five digits of index are kept.
const maxJobNameLen = 63 - len("-evaluator-") - 5

// JobName is the job of attempt (1-based) of the TaskAction named
// taskActionName: its pod's name ("<name>-<attempt-1>", as Flyte names it)
// when that is a DNS-1035 label (the operator's webhooks refuse other job
// names) of at most maxJobNameLen characters; otherwise a name that is, made
// of the sanitised name, a hash of the original and the retry suffix, stable
// and distinct for distinct TaskActions.
func JobName(taskActionName string, attempt int32) string {
	name := container.PodName(taskActionName, attempt)
	if len(name) <= maxJobNameLen && isLetter(name[0]) {
		return name
	}
	suffix := "-" + strconv.Itoa(int(max(attempt, 1)-1))
	h := fnv.New32a()
	_, _ = h.Write([]byte(taskActionName))
	hash := fmt.Sprintf("%08x", h.Sum32())
	base := dnsLabelChars(taskActionName)
	if base == "" || !isLetter(base[0]) {
		base = "j-" + base
	}
	keep := maxJobNameLen - len(suffix) - len(hash) - 1
	base = strings.TrimRight(base[:min(len(base), keep)], "-")
	return base + "-" + hash + suffix
}

// dnsLabelChars lower-cases s and turns every character a DNS label cannot
// hold into '-', trimming '-' from both ends.
func dnsLabelChars(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if !isLetter(c) && (c < '0' || c > '9') {
			b[i] = '-'
		}
	}
	return strings.Trim(string(b), "-")
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' }

// replicaPodName is the name the operator gives replica index of type rtype.
func replicaPodName(job, rtype string, index int32) string {
	return job + "-" + strings.ToLower(rtype) + "-" + strconv.Itoa(int(index))
}
