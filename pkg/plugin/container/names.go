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

// labelValue sanitises v into a valid label value: characters outside
// [A-Za-z0-9._-] become '-', at most 63 characters, and leading or trailing
// non-alphanumerics are trimmed (a label value must start and end with one).
// The result may be empty; callers omit empty values.
func labelValue(v string) string {
	b := []byte(v)
	for i, c := range b {
		if !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			b[i] = '-'
		}
	}
	if len(b) > 63 {
		b = b[:63]
	}
	isEdge := func(r rune) bool { return r > 127 || !isAlnum(byte(r)) }
	return strings.TrimFunc(string(b), isEdge)
}

func isAlnum(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// identifier turns s into [A-Za-z_][A-Za-z0-9_]*: usable as a key in code,
// a file name or a variable name.
func identifier(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !isAlnum(c) && c != '_' {
			b[i] = '_'
		}
	}
	if len(b) == 0 || (b[0] >= '0' && b[0] <= '9') {
		return "k" + string(b)
	}
	return string(b)
}
