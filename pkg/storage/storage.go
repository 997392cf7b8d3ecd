// Package storage reads and writes the blobs a Flyte task exchanges with the
// executor (inputs, outputs, error.pb) at s3://, gs://, abfs:// (abfss://,
// azblob://) and file:// URIs, on gocloud.dev/blob, configured by Flyte's
// `storage:` section (config.StorageConfig). Every failure is returned as an
// error; the caller decides what a storage outage means (the reconciler:
// a system failure with backoff).
package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
	"google.golang.org/protobuf/proto"

	"github.com/taskaction/executor/pkg/config"
)

// ErrNotFound is wrapped by errors about objects that do not exist.
var ErrNotFound = errors.New("object not found")

// ErrTooLarge is wrapped when an object exceeds the configured read limit.
var ErrTooLarge = errors.New("object larger than the read limit")

// Location is a parsed blob URI: which bucket, and the key inside it.
type Location struct {
	Scheme string
	// Bucket is the bucket, or the container (Azure), or the root directory (file).
	Bucket string
	// Account is the Azure storage account (abfs URIs name it), else empty.
	Account string
	Key     string
}

// ParseURI splits a blob URI into its bucket and key.
//
//	s3://bucket/key, gs://bucket/key, azblob://container/key,
//	abfs[s]://container@account.dfs.core.windows.net/key,
//	file:///dir/key (bucket /dir), file://bucket/key (under the local root)
func ParseURI(uri string) (Location, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return Location{}, fmt.Errorf("storage: invalid URI %q: %w", uri, err)
	}
	loc := Location{Scheme: u.Scheme, Bucket: u.Host, Key: strings.TrimPrefix(u.Path, "/")}
	switch u.Scheme {
	case "s3", "gs", "azblob":
	case "abfs", "abfss":
		if u.User == nil || u.User.Username() == "" {
			return Location{}, fmt.Errorf("storage: %q: an %s URI names container@account.dfs.core.windows.net", uri, u.Scheme)
		}
		loc.Bucket = u.User.Username()
		loc.Account, _, _ = strings.Cut(u.Host, ".")
	case "file":
		if u.Host == "" {
			// An absolute path: the first directory is the bucket (a bucket at
			// "/" itself would be refused by the file backend).
			first, rest, _ := strings.Cut(loc.Key, "/")
			loc.Bucket, loc.Key = "/"+first, rest
			if first == "" {
				loc.Bucket = ""
			}
		}
	case "":
		return Location{}, fmt.Errorf("storage: %q is not a URI (want scheme://bucket/key)", uri)
	default:
		return Location{}, fmt.Errorf("storage: %q: unsupported scheme %q (supported: %s)", uri, u.Scheme,
			strings.Join(config.StorageSchemes(), ", "))
	}
	if loc.Bucket == "" {
		return Location{}, fmt.Errorf("storage: %q names no bucket", uri)
	}
	if loc.Key == "" {
		return Location{}, fmt.Errorf("storage: %q names no object", uri)
	}
	return loc, nil
}

// Store opens buckets on first use and keeps them open.
type Store struct {
	cfg        config.StorageConfig
	httpClient *http.Client
	limit      int64

	mu      sync.Mutex
	buckets map[string]*blob.Bucket
}

// New is a Store for cfg; nothing is dialled until a URI is used.
func New(cfg config.StorageConfig) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: cfg.DefaultHTTPClient.Timeout.Duration}
	if len(cfg.DefaultHTTPClient.Headers) > 0 {
		hc.Transport = headerTransport{headers: cfg.DefaultHTTPClient.Headers, next: http.DefaultTransport}
	}
	return &Store{cfg: cfg, httpClient: hc, limit: cfg.GetLimitBytes(), buckets: map[string]*blob.Bucket{}}, nil
}

type headerTransport struct {
	headers map[string][]string
	next    http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range t.headers {
		for _, v := range vs {
			r.Header.Add(k, v)
		}
	}
	return t.next.RoundTrip(r)
}

// bucket opens (once) the bucket of loc.
func (s *Store) bucket(ctx context.Context, loc Location) (*blob.Bucket, error) {
	id := loc.Scheme + "://" + loc.Account + "/" + loc.Bucket
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.buckets[id]; ok {
		return b, nil
	}
	kind, settings, err := s.cfg.Backend(loc.Scheme)
	if err != nil {
		return nil, err
	}
	b, err := openBucket(ctx, kind, settings, loc, s.httpClient)
	if err != nil {
		return nil, fmt.Errorf("storage: open %s://%s: %w", loc.Scheme, loc.Bucket, err)
	}
	s.buckets[id] = b
	return b, nil
}

// Close closes every bucket opened.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for id, b := range s.buckets {
		errs = append(errs, b.Close())
		delete(s.buckets, id)
	}
	return errors.Join(errs...)
}

func wrap(op, uri string, err error) error {
	if gcerrors.Code(err) == gcerrors.NotFound {
		return fmt.Errorf("storage: %s %s: %w", op, uri, ErrNotFound)
	}
	return fmt.Errorf("storage: %s %s: %w", op, uri, err)
}

// Read returns the object at uri, refusing one larger than the read limit.
func (s *Store) Read(ctx context.Context, uri string) ([]byte, error) {
	loc, err := ParseURI(uri)
	if err != nil {
		return nil, err
	}
	b, err := s.bucket(ctx, loc)
	if err != nil {
		return nil, err
	}
	r, err := b.NewReader(ctx, loc.Key, nil)
	if err != nil {
		return nil, wrap("read", uri, err)
	}
	defer func() { _ = r.Close() }()
	if r.Size() > s.limit {
		return nil, fmt.Errorf("storage: read %s: %d bytes: %w of %d bytes (storage.limits.maxDownloadMBs)", uri, r.Size(), ErrTooLarge, s.limit)
	}
	data, err := io.ReadAll(io.LimitReader(r, s.limit+1))
	if err != nil {
		return nil, wrap("read", uri, err)
	}
	if int64(len(data)) > s.limit {
		return nil, fmt.Errorf("storage: read %s: %w of %d bytes (storage.limits.maxDownloadMBs)", uri, ErrTooLarge, s.limit)
	}
	return data, nil
}

// Write stores data at uri.
func (s *Store) Write(ctx context.Context, uri string, data []byte) error {
	loc, err := ParseURI(uri)
	if err != nil {
		return err
	}
	b, err := s.bucket(ctx, loc)
	if err != nil {
		return err
	}
	if err := b.WriteAll(ctx, loc.Key, data, &blob.WriterOptions{ContentType: "application/octet-stream"}); err != nil {
		return wrap("write", uri, err)
	}
	return nil
}

// Exists says whether an object is at uri.
func (s *Store) Exists(ctx context.Context, uri string) (bool, error) {
	loc, err := ParseURI(uri)
	if err != nil {
		return false, err
	}
	b, err := s.bucket(ctx, loc)
	if err != nil {
		return false, err
	}
	ok, err := b.Exists(ctx, loc.Key)
	if err != nil {
		return false, wrap("stat", uri, err)
	}
	return ok, nil
}

// ReadProtobuf decodes the object at uri into m.
func (s *Store) ReadProtobuf(ctx context.Context, uri string, m proto.Message) error {
	data, err := s.Read(ctx, uri)
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(data, m); err != nil {
		return fmt.Errorf("storage: %s is not a %s: %w", uri, m.ProtoReflect().Descriptor().FullName(), err)
	}
	return nil
}

// WriteProtobuf encodes m and stores it at uri.
func (s *Store) WriteProtobuf(ctx context.Context, uri string, m proto.Message) error {
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return fmt.Errorf("storage: encode %s: %w", m.ProtoReflect().Descriptor().FullName(), err)
	}
	return s.Write(ctx, uri, data)
}
