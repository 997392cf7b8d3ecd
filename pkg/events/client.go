package events

import (
	"net"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/taskaction/executor/gen/executor/events/v2/eventsv2connect"
	"github.com/taskaction/executor/gen/flyteidl2/workflow/workflowconnect"
)

// NewClient is a connect client of the events service at baseURL: Flyte's
// EventsProxyService (such as http://flyteadmin.flyte.svc.cluster.local:80)
// or the embedded one (http://localhost:8090). A nil httpClient gets one whose
// idle pool keeps a connection per in-flight batch.
func NewClient(baseURL string, httpClient *http.Client, opts ...connect.ClientOption) workflowconnect.EventsProxyServiceClient {
	if httpClient == nil {
		httpClient = DefaultHTTPClient()
	}
	return workflowconnect.NewEventsProxyServiceClient(httpClient, strings.TrimRight(baseURL, "/"), opts...)
}

// NewQueryClient is a client of the embedded events service's read side.
// Its transport has no overall timeout because Watch is a long stream: unary
// calls are bounded by their context instead.
func NewQueryClient(baseURL string, httpClient *http.Client, opts ...connect.ClientOption) eventsv2connect.EventsQueryServiceClient {
	if httpClient == nil {
		httpClient = DefaultHTTPClient()
	}
	return eventsv2connect.NewEventsQueryServiceClient(httpClient, strings.TrimRight(baseURL, "/"), opts...)
}

// DefaultHTTPClient is the HTTP client NewClient uses when given none.
func DefaultHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 0, // per-call contexts bound unary calls; streams wait
		ForceAttemptHTTP2:     true,
	}}
}
