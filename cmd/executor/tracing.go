package main

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"

	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/tracing"
)

// serviceTracing is the otel section's exporter for a service command and
// the provider of its spans (service: tracing.ServiceEvents or
// ServiceCache); stop flushes and closes it once the service has stopped.
func serviceTracing(ctx context.Context, cfg config.OtelConfig, service string, log logr.Logger) (*tracing.Exporter, func(), error) {
	exp, err := tracing.Open(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: %w", err)
	}
	if exp.Enabled() {
		log.Info("exporting traces", "type", cfg.Type, "service", service)
	}
	stop := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := exp.Shutdown(sctx); err != nil {
			log.Error(err, "flushing the last spans failed")
		}
	}
	return exp, stop, nil
}
