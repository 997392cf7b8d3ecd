package config_test

import (
	"testing"

	"github.com/taskaction/executor/pkg/config"
)

// The otel section's defaults are Flyte's, and a file sets each key of it,
// merged across files as Flyte merges them.
func TestOtelSection(t *testing.T) {
	d := config.Default().Otel
	want := config.OtelConfig{
		Type:     "noop",
		File:     config.OtelFileConfig{Filename: "/tmp/trace.txt"},
		OtlpGrpc: config.OtelOtlpConfig{Endpoint: "http://localhost:4317"},
		OtlpHTTP: config.OtelOtlpConfig{Endpoint: "http://localhost:4318/v1/traces"},
		Sampler:  config.OtelSamplerConfig{ParentSampler: "always", TraceIDRatio: 0.01},
	}
	if d != want || d.Enabled() {
		t.Fatalf("default otel section %+v (enabled %v), want Flyte's %+v, off", d, d.Enabled(), want)
	}

	dir := writeFiles(t, map[string]string{
		"10-otel.yaml":  "otel:\n  type: otlphttp\n  otlphttp:\n    endpoint: https://collector:4318/v1/traces\n  sampler:\n    parentSampler: traceid\n",
		"20-ratio.yaml": "otel:\n  sampler:\n    traceIdRatio: \"0.25\"\n  file:\n    filename: /var/log/spans.json\n",
	})
	c, err := config.Load(dir+"/*.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	want.Type = "otlphttp"
	want.OtlpHTTP.Endpoint = "https://collector:4318/v1/traces"
	want.Sampler = config.OtelSamplerConfig{ParentSampler: "traceid", TraceIDRatio: 0.25}
	want.File.Filename = "/var/log/spans.json"
	if c.Otel != want || !c.Otel.Enabled() {
		t.Fatalf("loaded otel section %+v, want %+v", c.Otel, want)
	}
}
