package storage

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskaction/executor/gen/flyteidl2/core"
	"github.com/taskaction/executor/pkg/storage/layout"
	"github.com/taskaction/executor/pkg/tracing"
)

// TraceWith gives the reads of a task's files (its inputs, error.pb, the
// outputs check) a span each, a child of the caller's. Call it before the
// Store is used; a provider that makes no spans (or nil) adds nothing.
func (s *Store) TraceWith(tp trace.TracerProvider) {
	s.tracer = tracing.NewTracer(tp, "executor/storage")
}

const attrURI = attribute.Key("storage.uri")

// span starts the span of a read of uri; the caller ends it with tracing.End.
func (s *Store) span(ctx context.Context, name, uri string) (context.Context, trace.Span) {
	ctx, span := s.tracer.Start(ctx, name)
	if span.IsRecording() {
		span.SetAttributes(attrURI.String(uri))
	}
	return ctx, span
}

// orGiven is the file's URI that pkg/storage/layout made from given, or given
// itself where layout made none (given is empty or not a URL), so that the
// read fails naming what it was given.
func orGiven(uri, given string) string {
	if uri == "" {
		return given
	}
	return uri
}

// ReadInputs reads the task's inputs as a LiteralMap. The runtime's inputs
// file is a flyteidl2.task.Inputs, whose repeated {name, value} has the wire
// form of a LiteralMap's map (a name given twice keeps the last value).
// ErrNotFound (wrapped) when there is no inputs file.
func (s *Store) ReadInputs(ctx context.Context, inputURI string) (_ *core.LiteralMap, err error) {
	uri := orGiven(layout.InputURI(inputURI), inputURI)
	ctx, span := s.span(ctx, "storage.ReadInputs", uri)
	defer func() { tracing.End(span, err) }()
	m := &core.LiteralMap{}
	if err := s.ReadProtobuf(ctx, uri, m); err != nil {
		return nil, err
	}
	return m, nil
}

// OutputsExist says whether the attempt wrote its outputs file under
// outputPrefix, as Flyte requires of a succeeded attempt whose task declares
// outputs.
func (s *Store) OutputsExist(ctx context.Context, outputPrefix string) (ok bool, err error) {
	uri := orGiven(layout.Join(outputPrefix, layout.OutputsFile), outputPrefix)
	ctx, span := s.span(ctx, "storage.OutputsExist", uri)
	defer func() { endExists(span, ok, err) }()
	return s.Exists(ctx, uri)
}

const attrExists = attribute.Key("storage.exists")

func endExists(span trace.Span, ok bool, err error) {
	if span.IsRecording() && err == nil {
		span.SetAttributes(attrExists.Bool(ok))
	}
	tracing.End(span, err)
}

// TaskError is the failure a task's runtime reported in error.pb, read the
// way Flyte's executor reads it.
type TaskError struct {
	Code, Message string
	// Kind is USER, SYSTEM, or UNKNOWN when the runtime named no origin.
	Kind core.ExecutionError_ErrorKind
	// Recoverable: a retry may help. A non-recoverable error fails the task
	// at once, whatever retries are left.
	Recoverable bool
}

// Codes Flyte gives a failure whose error.pb is missing or empty.
const (
	CodeErrorFileNotFound  = "ErrorFileNotFound"
	CodeErrorFileBadFormat = "ErrorFileBadFormat"
)

// TaskErrorFromDocument interprets an error.pb. A document without an error
// is a recoverable SYSTEM failure, as in Flyte.
func TaskErrorFromDocument(doc *core.ErrorDocument, uri string) TaskError {
	e := doc.GetError()
	if e == nil {
		return TaskError{Code: CodeErrorFileBadFormat, Kind: core.ExecutionError_SYSTEM, Recoverable: true,
			Message: fmt.Sprintf("%s holds no error", uri)}
	}
	return TaskError{Code: e.GetCode(), Message: e.GetMessage(), Kind: e.GetOrigin(),
		Recoverable: e.GetKind() == core.ContainerError_RECOVERABLE}
}

// ReadTaskError reads error.pb under outputPrefix. A missing file is a
// recoverable SYSTEM failure (as in Flyte), not an error; only a storage
// failure or an unreadable file is an error.
func (s *Store) ReadTaskError(ctx context.Context, outputPrefix string) (_ TaskError, err error) {
	uri := orGiven(layout.Join(outputPrefix, layout.ErrorFile), outputPrefix)
	ctx, span := s.span(ctx, "storage.ReadTaskError", uri)
	defer func() { tracing.End(span, err) }()
	doc := &core.ErrorDocument{}
	err = s.ReadProtobuf(ctx, uri, doc)
	if errors.Is(err, ErrNotFound) {
		return TaskError{Code: CodeErrorFileNotFound, Kind: core.ExecutionError_SYSTEM, Recoverable: true,
			Message: fmt.Sprintf("the task left no %s", uri)}, nil
	}
	if err != nil {
		return TaskError{}, err
	}
	return TaskErrorFromDocument(doc, uri), nil
}

// HasTaskError says whether the attempt left an error.pb under outputPrefix:
// a container that exits 0 with an error.pb failed (Flyte's user errors).
func (s *Store) HasTaskError(ctx context.Context, outputPrefix string) (ok bool, err error) {
	uri := orGiven(layout.Join(outputPrefix, layout.ErrorFile), outputPrefix)
	ctx, span := s.span(ctx, "storage.HasTaskError", uri)
	defer func() { endExists(span, ok, err) }()
	return s.Exists(ctx, uri)
}
