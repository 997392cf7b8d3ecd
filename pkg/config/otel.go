package config

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
)

// OtelSection is the top-level YAML key of the tracing configuration: Flyte's
// own `otel:` section (flytestdlib's otelutils), read as Flyte reads it, so
// one file turns tracing on for the executor and Flyte's services alike.
const OtelSection = "otel"

// Exporter types (OtelConfig.Type), Flyte's names.
const (
	OtelNoop     = "noop"
	OtelFile     = "file"
	OtelOtlpGrpc = "otlpgrpc"
	OtelOtlpHTTP = "otlphttp"
	// OtelJaeger is Flyte's exporter of Jaeger's own protocol, which
	// OpenTelemetry Go no longer has: refused, with what to set instead.
	OtelJaeger = "jaeger"
)

// Samplers (OtelSamplerConfig.ParentSampler), Flyte's names. Either applies
// to traces that begin here; a span whose caller sent a trace context follows
// the caller's decision.
const (
	OtelSampleAlways  = "always"
	OtelSampleTraceID = "traceid"
)

// OtelConfig is the `otel` section: where spans go. The default, noop,
// creates no span at all.
type OtelConfig struct {
	// Type is noop, file, otlpgrpc or otlphttp.
	Type     string            `json:"type"`
	File     OtelFileConfig    `json:"file"`
	OtlpGrpc OtelOtlpConfig    `json:"otlpgrpc"`
	OtlpHTTP OtelOtlpConfig    `json:"otlphttp"`
	Sampler  OtelSamplerConfig `json:"sampler"`
}

// OtelFileConfig is `otel.file`.
type OtelFileConfig struct {
	// Filename is created (truncated) at start; spans are written to it as
	// JSON, one indented object each.
	Filename string `json:"filename"`
}

// OtelOtlpConfig is `otel.otlpgrpc` and `otel.otlphttp`.
type OtelOtlpConfig struct {
	// Endpoint is the collector's URL: http:// is plaintext, https:// TLS;
	// for otlphttp, the path is where traces are posted (/v1/traces).
	Endpoint string `json:"endpoint"`
}

// OtelSamplerConfig is `otel.sampler`.
type OtelSamplerConfig struct {
	// ParentSampler is always or traceid.
	ParentSampler string `json:"parentSampler"`
	// TraceIDRatio is the share of new traces kept with traceid, 0 to 1.
	TraceIDRatio float64 `json:"traceIdRatio"`
}

// DefaultOtelConfig is Flyte's default `otel:` section: no tracing; when
// turned on, every trace kept, the collectors on localhost.
func DefaultOtelConfig() OtelConfig {
	return OtelConfig{
		Type:     OtelNoop,
		File:     OtelFileConfig{Filename: "/tmp/trace.txt"},
		OtlpGrpc: OtelOtlpConfig{Endpoint: "http://localhost:4317"},
		OtlpHTTP: OtelOtlpConfig{Endpoint: "http://localhost:4318/v1/traces"},
		Sampler:  OtelSamplerConfig{ParentSampler: OtelSampleAlways, TraceIDRatio: 0.01},
	}
}

// Enabled says whether spans are exported at all.
func (c OtelConfig) Enabled() bool { return c.Type != OtelNoop }

// Validate checks what the chosen exporter uses; with noop nothing is used,
// and, as in Flyte, nothing else is judged. Each line starts with its
// dotted key.
func (c OtelConfig) Validate() error {
	var errs []error
	switch c.Type {
	case OtelNoop:
		return nil
	case OtelFile:
		if strings.TrimSpace(c.File.Filename) == "" {
			errs = append(errs, errors.New("otel.file.filename must name the file spans are written to (otel.type is file)"))
		}
	case OtelOtlpGrpc:
		if err := validateCollectorURL(c.OtlpGrpc.Endpoint); err != nil {
			errs = append(errs, fmt.Errorf("otel.otlpgrpc.endpoint %w (otel.type is otlpgrpc)", err))
		}
	case OtelOtlpHTTP:
		if err := validateCollectorURL(c.OtlpHTTP.Endpoint); err != nil {
			errs = append(errs, fmt.Errorf("otel.otlphttp.endpoint %w (otel.type is otlphttp)", err))
		}
	case OtelJaeger:
		return errors.New(`otel.type "jaeger": OpenTelemetry Go no longer has a Jaeger exporter, and Jaeger takes OTLP itself: ` +
			`set otel.type to otlpgrpc with otel.otlpgrpc.endpoint http://<jaeger-collector>:4317, ` +
			`or to otlphttp with otel.otlphttp.endpoint http://<jaeger-collector>:4318/v1/traces`)
	default:
		return fmt.Errorf("otel.type %q: want noop, file, otlpgrpc or otlphttp", c.Type)
	}
	switch c.Sampler.ParentSampler {
	case OtelSampleAlways:
	case OtelSampleTraceID:
		if r := c.Sampler.TraceIDRatio; math.IsNaN(r) || r < 0 || r > 1 {
			errs = append(errs, fmt.Errorf("otel.sampler.traceIdRatio must be between 0 and 1 (the share of traces kept), got %v", r))
		}
	default:
		errs = append(errs, fmt.Errorf("otel.sampler.parentSampler %q: want always or traceid", c.Sampler.ParentSampler))
	}
	return errors.Join(errs...)
}

// validateCollectorURL: an OTLP endpoint as the exporters take it, a URL
// whose scheme says whether TLS is used.
func validateCollectorURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || !strings.Contains(raw, "://"):
		return fmt.Errorf("%q: want a URL such as http://collector:4317 (http: plaintext, https: TLS)", raw)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q: the scheme must be http or https, not %q", raw, u.Scheme)
	case u.Hostname() == "":
		return fmt.Errorf("%q has no host", raw)
	}
	return nil
}
