package metrics

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
)

// ResourceNone is the resource label of requests outside a resource
// (discovery, /version, /openapi, /healthz).
const ResourceNone = "none"

var (
	apiRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "api_requests_total",
		Help: "Kubernetes API requests, by verb, resource (resource[.group][/subresource]) and HTTP code (or \"error\" when no response came). Watches are not counted.",
	}, []string{"verb", "resource", "code"})

	apiRequestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "api_request_duration_seconds",
		Help:    "Latency of Kubernetes API requests until the response headers, by verb and resource. Watches are not observed; client-side rate limiting is not included.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"verb", "resource"})
)

// InstrumentRESTConfig makes every client built from cfg (the manager's
// cache, clients and leader election) count its API requests into
// executor_api_requests_total and executor_api_request_duration_seconds.
// Call it once on the config given to the manager, before creating it;
// calling it twice counts every request twice.
func InstrumentRESTConfig(cfg *rest.Config) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &roundTripper{next: rt} })
}

type roundTripper struct{ next http.RoundTripper }

func (t *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	verb, resource, watch := requestInfo(req.Method, req.URL)
	if watch {
		// A watch lasts until it is closed: its latency means nothing, and
		// its count is controller-runtime's reflector's business.
		return t.next.RoundTrip(req)
	}
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	code := "error"
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	apiRequests.WithLabelValues(verb, resource, code).Inc()
	took := time.Since(start)
	apiRequestDuration.WithLabelValues(verb, resource).Observe(took.Seconds())
	if verb != "get" && verb != "list" {
		observeWrite(took)
	}
	return resp, err
}

// namespaceSubresources are the subresources of a namespace itself, as the
// API server tells them from resources inside a namespace.
var namespaceSubresources = map[string]bool{"status": true, "finalize": true}

// requestInfo tells the Kubernetes verb and resource of a request, the way the
// API server's request-info resolver does, from its method and URL path. It
// never returns object names or namespaces, which would make the labels unbounded.
func requestInfo(method string, u *url.URL) (verb, resource string, watch bool) {
	verb = strings.ToLower(method)
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	var group string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		group, parts = parts[1], parts[3:]
	default:
		return verb, ResourceNone, false
	}
	if parts[0] == "watch" {
		watch, parts = true, parts[1:]
		if len(parts) == 0 {
			return "watch", ResourceNone, true
		}
	}
	if b, err := strconv.ParseBool(u.Query().Get("watch")); err == nil && b {
		watch = true
	}
	if parts[0] == "namespaces" && len(parts) > 2 && !namespaceSubresources[parts[2]] {
		parts = parts[2:] // namespaces/{ns}/{resource}/...
	}
	resource = parts[0]
	if group != "" {
		resource += "." + group
	}
	if len(parts) > 2 {
		resource += "/" + parts[2]
	}
	named := len(parts) > 1
	switch {
	case watch:
		verb = "watch"
	case method == http.MethodGet && named:
		verb = "get"
	case method == http.MethodGet:
		verb = "list"
	case method == http.MethodPost:
		verb = "create"
	case method == http.MethodPut:
		verb = "update"
	case method == http.MethodPatch:
		verb = "patch"
	case method == http.MethodDelete && named:
		verb = "delete"
	case method == http.MethodDelete:
		verb = "deletecollection"
	}
	return verb, resource, watch
}
