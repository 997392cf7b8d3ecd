// Package layout is Flyte's layout of a task's files in blob storage: the
// names of the files of the task contract (inputs.pb, outputs.pb, error.pb)
// and how their URIs are made from a folder's. It is the one definition the
// task model (which computes an attempt's prefixes) and the store (which
// reads the files) share; it imports neither.
package layout

import (
	"net/url"
	"strings"
)

// File names of Flyte's task contract under an input or output prefix.
const (
	InputsFile  = "inputs.pb"
	OutputsFile = "outputs.pb"
	ErrorFile   = "error.pb"
)

// Join appends elem to the storage reference base, as Flyte's storage layer
// does: base is read as a folder (with or without its trailing slash) and
// elem resolved against it. Empty when base is empty or not a URL.
func Join(base, elem string) string {
	if base == "" {
		return ""
	}
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	u, err := url.Parse(base)
	if err != nil {
		return ""
	}
	rel, err := url.Parse(strings.Trim(elem, "/"))
	if err != nil {
		return ""
	}
	return u.ResolveReference(rel).String()
}

// InputPrefix is the folder of the inputs: a TaskAction's spec.inputUri
// without a trailing "/inputs.pb" (a root action's inputUri is already the
// folder).
func InputPrefix(inputURI string) string {
	return strings.TrimSuffix(inputURI, "/"+InputsFile)
}

// InputURI is the inputs file of a TaskAction's spec.inputUri, which Flyte
// writes as a folder for root actions and as the file itself for others:
// "<input prefix>/inputs.pb", whatever trailing slashes inputURI has. Empty
// when inputURI is empty or not a URL.
func InputURI(inputURI string) string {
	return Join(InputPrefix(strings.TrimRight(inputURI, "/")), InputsFile)
}
