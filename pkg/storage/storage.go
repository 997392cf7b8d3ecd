// Package storage reads and writes the blobs a Flyte task exchanges with the
// executor (inputs, outputs, error.pb) at s3://, gs://, abfs:// (abfss://,
// azblob://) and file:// URIs, on gocloud.dev/blob, configured by Flyte's
// `storage:` section (config.StorageConfig).
//
// A TaskAction's author chooses the URIs, and the executor reaches them with
// its own credentials: only the locations the storage section allows
// (config.StorageConfig.AllowedLocations) are ever opened, and a URI outside
// them is refused before any I/O with an error wrapping
// ErrLocationNotAllowed. Every other failure is returned as an error too; the
// caller decides what a storage outage means (the reconciler: a system
// failure with backoff).
package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
	"google.golang.org/protobuf/proto"

	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/tracing"
)

// ErrNotFound is wrapped by errors about objects that do not exist.
var ErrNotFound = errors.New("object not found")

// ErrTooLarge is wrapped when an object exceeds the configured read limit.
var ErrTooLarge = errors.New("object larger than the read limit")

// ErrLocationNotAllowed is wrapped by the refusal of a URI outside the
// locations the storage section allows (storage.container and
// storage.allowed-containers). The message names the URI and the key that
// would allow it. Nothing was read, written or dialled.
var ErrLocationNotAllowed = errors.New("location not allowed")

// ErrInvalidURI is wrapped by the refusal of a URI that is not one of a
// blob: no scheme://bucket/key, an unsupported scheme, or a path with . or
// .. segments.
var ErrInvalidURI = errors.New("invalid blob URI")

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
	loc, err := parse(uri)
	if err != nil {
		return Location{}, err
	}
	if loc.Key == "" {
		return Location{}, invalid(uri, "names no object")
	}
	return loc, nil
}

func invalid(uri, why string) error {
	return fmt.Errorf("storage: %q %s: %w", uri, why, ErrInvalidURI)
}

// parse is ParseURI that accepts a URI of a bucket or a folder (no key).
func parse(uri string) (Location, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return Location{}, fmt.Errorf("storage: %w: %w", ErrInvalidURI, err)
	}
	loc := Location{Scheme: u.Scheme, Bucket: u.Host, Key: strings.TrimPrefix(u.Path, "/")}
	switch u.Scheme {
	case "s3", "gs", "azblob":
	case "abfs", "abfss":
		if u.User == nil || u.User.Username() == "" {
			return Location{}, invalid(uri, "is not container@account.dfs.core.windows.net/key, as an "+u.Scheme+" URI must be")
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
		return Location{}, invalid(uri, "is not a URI (want scheme://bucket/key)")
	default:
		return Location{}, invalid(uri, fmt.Sprintf("has an unsupported scheme %q (supported: %s)", u.Scheme,
			strings.Join(config.StorageSchemes(), ", ")))
	}
	if loc.Bucket == "" {
		return Location{}, invalid(uri, "names no bucket")
	}
	return loc, nil
}

// Store reaches the locations its configuration allows, opening each bucket
// on first use and keeping it open: at most one bucket per allowed location
// is ever open, whatever URIs it is given.
type Store struct {
	cfg       config.StorageConfig
	allowed   []config.StorageLocation
	localRoot string // where file://name/... lives; "" if nowhere
	// httpClient serves GCS and Azure; S3 has a client of the AWS SDK.
	httpClient *http.Client
	limit      int64

	mu      sync.Mutex
	buckets map[string]*blob.Bucket // by target.id

	tracer tracing.Tracer // TraceWith; off by default
}

// New is a Store for cfg; nothing is dialled until a URI is used.
func New(cfg config.StorageConfig) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	allowed, err := cfg.AllowedLocations()
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: cfg.DefaultHTTPClient.Timeout.Duration}
	if len(cfg.DefaultHTTPClient.Headers) > 0 {
		hc.Transport = headerTransport{headers: cfg.DefaultHTTPClient.Headers, next: http.DefaultTransport}
	}
	return &Store{cfg: cfg, allowed: allowed, localRoot: cfg.LocalRoot(), httpClient: hc, limit: cfg.GetLimitBytes(),
		buckets: map[string]*blob.Bucket{}}, nil
}

// target is where an allowed URI leads: the bucket to open and the key in it.
type target struct {
	// id names the bucket; it is one of the allowed locations' buckets.
	id  string
	loc Location
}

// Check says whether the executor may read and write at uri, an object or a
// folder (a TaskAction's inputUri or runOutputBase), without any I/O: nil,
// or an error wrapping ErrLocationNotAllowed or ErrInvalidURI.
func (s *Store) Check(uri string) error {
	_, err := s.resolve(uri, false)
	return err
}

// resolve checks uri against the allowed locations and says which bucket
// and key it names. object: uri must name an object, not a bucket or folder.
func (s *Store) resolve(uri string, object bool) (target, error) {
	split := parse
	if object {
		split = ParseURI
	}
	loc, err := split(uri)
	if err != nil {
		return target{}, err
	}
	for _, seg := range strings.Split(loc.Key, "/") {
		if seg == "." || seg == ".." {
			return target{}, invalid(uri, "has . or .. path segments")
		}
	}
	if loc.Scheme == "file" {
		return s.resolveFile(uri, loc)
	}
	account := strings.ToLower(loc.Account)
	if account == "" && (loc.Scheme == "abfs" || loc.Scheme == "abfss" || loc.Scheme == "azblob") {
		account = s.cfg.AzureAccount(loc.Scheme)
	}
	key := loc.Key
	if !object && !strings.HasSuffix(key, "/") {
		key += "/" // a folder: s3://b/f is allowed by s3://b/f/
	}
	for _, a := range s.allowed {
		if a.Scheme != loc.Scheme || a.Bucket != loc.Bucket || a.Account != account {
			continue
		}
		if a.Prefix != "" && !strings.HasPrefix(key, a.Prefix+"/") {
			continue
		}
		loc.Account = account
		return target{id: loc.Scheme + "://" + account + "/" + loc.Bucket, loc: loc}, nil
	}
	bucket := loc.Scheme + "://" + loc.Bucket
	if u, err := url.Parse(uri); err == nil && u.User != nil {
		bucket = loc.Scheme + "://" + u.User.Username() + "@" + u.Host
	}
	return target{}, s.notAllowed(uri, bucket)
}

// resolveFile places a file URI in the allowed directory that holds it: that
// directory is the bucket opened, so the file backend's own checks keep the
// key inside it too.
func (s *Store) resolveFile(uri string, loc Location) (target, error) {
	var p string
	switch {
	case strings.HasPrefix(loc.Bucket, "/"):
		p = path.Join(loc.Bucket, loc.Key)
	case s.localRoot != "":
		p = path.Join(s.localRoot, loc.Bucket, loc.Key)
	default:
		return target{}, s.notAllowed(uri, "file:///<absolute directory>")
	}
	for _, a := range s.allowed {
		if a.Scheme != "file" || (p != a.Bucket && !strings.HasPrefix(p, a.Bucket+"/")) {
			continue
		}
		key := strings.TrimPrefix(strings.TrimPrefix(p, a.Bucket), "/")
		return target{id: "file://" + a.Bucket, loc: Location{Scheme: "file", Bucket: a.Bucket, Key: key}}, nil
	}
	return target{}, s.notAllowed(uri, "file://"+path.Dir(p))
}

// notAllowed is the refusal of uri, suggesting the entry that would allow it.
func (s *Store) notAllowed(uri, suggestion string) error {
	var allowed []string
	for _, a := range s.allowed {
		allowed = append(allowed, fmt.Sprintf("%s (%s)", a, a.Key))
	}
	where := "the storage section allows no location (" + config.StorageContainerKey + " is empty and " +
		config.StorageAllowedContainersKey + " lists none)"
	if len(allowed) > 0 {
		where = "the executor reads and writes only " + strings.Join(allowed, ", ")
	}
	return fmt.Errorf("storage: %s: %w: %s; to allow it, list %s in %s",
		uri, ErrLocationNotAllowed, where, suggestion, config.StorageAllowedContainersKey)
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

// open checks uri and opens (once) its bucket: only an allowed location's
// bucket is ever opened.
func (s *Store) open(ctx context.Context, uri string) (*blob.Bucket, string, error) {
	t, err := s.resolve(uri, true)
	if err != nil {
		return nil, "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.buckets[t.id]; ok {
		return b, t.loc.Key, nil
	}
	kind, settings, err := s.cfg.Backend(t.loc.Scheme)
	if err != nil {
		return nil, "", err
	}
	b, err := openBucket(ctx, kind, settings, t.loc, s.cfg.DefaultHTTPClient, s.httpClient)
	if err != nil {
		return nil, "", fmt.Errorf("storage: open %s://%s: %w", t.loc.Scheme, t.loc.Bucket, err)
	}
	s.buckets[t.id] = b
	return b, t.loc.Key, nil
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
	b, key, err := s.open(ctx, uri)
	if err != nil {
		return nil, err
	}
	r, err := b.NewReader(ctx, key, nil)
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
	b, key, err := s.open(ctx, uri)
	if err != nil {
		return err
	}
	if err := b.WriteAll(ctx, key, data, &blob.WriterOptions{ContentType: "application/octet-stream"}); err != nil {
		return wrap("write", uri, err)
	}
	return nil
}

// Exists says whether an object is at uri.
func (s *Store) Exists(ctx context.Context, uri string) (bool, error) {
	b, key, err := s.open(ctx, uri)
	if err != nil {
		return false, err
	}
	ok, err := b.Exists(ctx, key)
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
