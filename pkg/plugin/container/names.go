package container

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// maxPodNameLen keeps pod names usable as label values and hostnames too.
const maxPodNameLen = 63

// PodName is the pod of attempt (1-based) of the TaskAction named
// taskActionName: "<name>-<attempt-1>", as a DNS-1123 label of at most 63
// characters. When the name had to be changed (characters a label cannot hold,
// or too long) a hash of the original name is added before the retry suffix,
// so that different TaskActions do not collide and the result stays stable.
// Attempts below 1 count as 1.
func PodName(taskActionName string, attempt int32) string {
	suffix := "-" + strconv.Itoa(int(max(attempt, 1)-1))
	base := dnsLabelChars(taskActionName)
	if base == taskActionName && base != "" && len(base)+len(suffix) <= maxPodNameLen {
		return base + suffix
	}
	h := shortHash(taskActionName)
	keep := maxPodNameLen - len(suffix) - len(h) - 1
	if len(base) > keep {
		base = strings.TrimRight(base[:keep], "-")
	}
	if base == "" {
		return h + suffix
	}
	return base + "-" + h + suffix
}

// dnsLabelChars lower-cases s, turns every character a DNS-1123 label cannot
// hold into '-', and trims '-' from both ends.
func dnsLabelChars(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			b[i] = '-'
		}
	}
	return strings.Trim(string(b), "-")
}

// shortHash is 8 hex digits of FNV-32a: short, stable across releases.
func shortHash(s string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return fmt.Sprintf("%08x", h.Sum32())
}

// LabelValue makes v a valid label value as Flyte does: characters outside
// [A-Za-z0-9._-] become '-', at most 63 characters, and a first or last
// character that is not alphanumeric becomes 'x'. Empty stays empty (callers
// omit the label).
func LabelValue(v string) string {
	if v == "" {
		return ""
	}
	b := make([]byte, 0, len(v))
	for _, r := range v {
		if r < 128 && (isAlnum(byte(r)) || r == '.' || r == '_' || r == '-') {
			b = append(b, byte(r))
		} else {
			b = append(b, '-')
		}
	}
	if len(b) > 63 {
		b = b[:63]
	}
	if !isAlnum(b[0]) {
		b[0] = 'x'
	}
	if !isAlnum(b[len(b)-1]) {
		b[len(b)-1] = 'x'
	}
	return string(b)
}

func isAlnum(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// perRetryUniqueKey is Flyte's {{.PerRetryUniqueKey}} of a pod name: a
// leading run of characters that cannot start an identifier becomes "a",
// and every other run of characters outside [A-Za-z0-9_] becomes "_".
func perRetryUniqueKey(podName string) string {
	var b strings.Builder
	i := 0
	for i < len(podName) && !isIdentStart(podName[i]) {
		i++
	}
	if i > 0 {
		b.WriteByte('a')
	}
	inRun := false
	for ; i < len(podName); i++ {
		c := podName[i]
		if isAlnum(c) || c == '_' {
			b.WriteByte(c)
			inRun = false
			continue
		}
		if !inRun {
			b.WriteByte('_')
			inRun = true
		}
	}
	return b.String()
}

func isIdentStart(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'
}
