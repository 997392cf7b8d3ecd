package events

import (
	"net"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/taskaction/executor/gen/executor/events/v1/eventsv1connect"
)

// NewClient is a connect client of the events service at baseURL (such as
// http://localhost:8090). A nil httpClient gets one whose idle pool keeps a
// connection per in-flight batch; it has no overall timeout because Watch is
// a long stream: unary calls are bounded by their context instead.
func NewClient(baseURL string, httpClient *http.Client, opts ...connect.ClientOption) eventsv1connect.EventsServiceClient {
	if httpClient == nil {
		httpClient = DefaultHTTPClient()
	}
	return eventsv1connect.NewEventsServiceClient(httpClient, strings.TrimRight(baseURL, "/"), opts...)
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
