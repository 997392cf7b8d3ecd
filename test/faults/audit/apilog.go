package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/taskaction/executor/pkg/plugin/container"
)

// Policy is the API server's audit policy for the suites: the request body
// of pod creates (their labels and owner), the metadata of every other write.
const Policy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Request
  verbs: ["create"]
  resources: [{group: "", resources: ["pods"]}]
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

// APIRequest is one write the audit log recorded.
type APIRequest struct {
	User, UserAgent                                     string
	Verb, Group, Resource, Subresource, Namespace, Name string
	Code                                                int
	// At is when the API server received the request.
	At time.Time
	// Pod is the request body of a pod create.
	Pod *corev1.Pod
}

// auditEvent is the part of an audit.k8s.io/v1 Event the audits read.
type auditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestObject            json.RawMessage `json:"requestObject"`
	RequestReceivedTimestamp time.Time       `json:"requestReceivedTimestamp"`
}

// ReadAPILog reads the audit log at path. The API server may be writing it:
// a last line without its newline is not complete yet and is left out.
func ReadAPILog(path string) ([]APIRequest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseAPILog(bytes.NewReader(b[:bytes.LastIndexByte(b, '\n')+1]))
}

// ParseAPILog reads audit events, one JSON object a line, keeping completed writes.
func ParseAPILog(r io.Reader) ([]APIRequest, error) {
	var out []APIRequest
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	line := 0
	for sc.Scan() {
		line++
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return out, fmt.Errorf("audit log line %d: %w", line, err)
		}
		if ev.Stage != "ResponseComplete" || ev.ObjectRef == nil {
			continue
		}
		req := APIRequest{User: ev.User.Username, UserAgent: ev.UserAgent, Verb: ev.Verb,
			Group: ev.ObjectRef.APIGroup, Resource: ev.ObjectRef.Resource, Subresource: ev.ObjectRef.Subresource,
			Namespace: ev.ObjectRef.Namespace, Name: ev.ObjectRef.Name, At: ev.RequestReceivedTimestamp}
		if ev.ResponseStatus != nil {
			req.Code = ev.ResponseStatus.Code
		}
		if ev.Verb == "create" && ev.ObjectRef.Resource == "pods" && ev.ObjectRef.Subresource == "" && len(ev.RequestObject) > 0 {
			var p corev1.Pod
			if err := json.Unmarshal(ev.RequestObject, &p); err == nil {
				req.Pod = &p
				if req.Name == "" {
					req.Name = p.Name
				}
			}
		}
		out = append(out, req)
	}
	return out, sc.Err()
}

// PodCreates are the pod creates of reqs.
func PodCreates(reqs []APIRequest) []PodCreate {
	var out []PodCreate
	for _, q := range reqs {
		if q.Verb != "create" || q.Resource != "pods" || q.Subresource != "" {
			continue
		}
		c := PodCreate{Namespace: q.Namespace, Name: q.Name, Code: q.Code, User: q.User}
		if q.Pod != nil {
			c.Attempt = q.Pod.Labels[container.LabelAttempt]
			for _, ref := range q.Pod.OwnerReferences {
				if ref.Kind == "TaskAction" {
					c.OwnerUID = string(ref.UID)
				}
			}
		}
		out = append(out, c)
	}
	return out
}

// LeaseTerm is a stretch of time one replica held the leader Lease.
type LeaseTerm struct {
	Holder     string
	From, Till time.Time
}

// LeaseTerms derives who held the Lease name when, from the successful
// writes of it: a replica holds it from its first successful write after
// another's until another's first successful write or leaseDuration after
// its own last one, whichever is first.
func LeaseTerms(reqs []APIRequest, name string, leaseDuration time.Duration) []LeaseTerm {
	var writes []APIRequest
	for _, q := range reqs {
		if q.Resource == "leases" && q.Name == name && q.Code/100 == 2 && (q.Verb == "create" || q.Verb == "update" || q.Verb == "patch") {
			writes = append(writes, q)
		}
	}
	sort.SliceStable(writes, func(i, j int) bool { return writes[i].At.Before(writes[j].At) })
	var terms []LeaseTerm
	for _, q := range writes {
		if n := len(terms); n > 0 && terms[n-1].Holder == q.User {
			terms[n-1].Till = q.At.Add(leaseDuration)
			continue
		}
		if n := len(terms); n > 0 && terms[n-1].Till.After(q.At) {
			terms[n-1].Till = q.At
		}
		terms = append(terms, LeaseTerm{Holder: q.User, From: q.At, Till: q.At.Add(leaseDuration)})
	}
	return terms
}

// WritesWithoutLease counts the writes of replicas (users) other than the
// Lease's own that came when the writer did not hold the Lease.
func WritesWithoutLease(reqs []APIRequest, replicas []string, leaseName string, leaseDuration time.Duration) (int, []string) {
	terms := LeaseTerms(reqs, leaseName, leaseDuration)
	isReplica := map[string]bool{}
	for _, r := range replicas {
		isReplica[r] = true
	}
	n := 0
	var details []string
	for _, q := range reqs {
		if !isReplica[q.User] || q.Resource == "leases" {
			continue
		}
		held := false
		for _, t := range terms {
			if t.Holder == q.User && !q.At.Before(t.From) && !q.At.After(t.Till) {
				held = true
				break
			}
		}
		if !held {
			n++
			if len(details) < maxDetails {
				details = append(details, fmt.Sprintf("%s %s %s/%s %s/%s at %s without the lease",
					q.User, q.Verb, q.Group, q.Resource, q.Namespace, q.Name, q.At.Format(time.RFC3339Nano)))
			}
		}
	}
	return n, details
}
