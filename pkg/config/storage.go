package config

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// StorageSection is the top-level YAML key of the blob-storage configuration:
// Flyte's own `storage:` section, read as Flyte reads it, so one file serves
// both.
const StorageSection = "storage"

// Storage types (StorageConfig.Type), Flyte's names.
const (
	StorageTypeS3    = "s3"
	StorageTypeMinio = "minio"
	StorageTypeLocal = "local"
	StorageTypeStow  = "stow"
)

// Stow kinds (StowConfig.Kind), Flyte's names, and the URI scheme each serves.
const (
	StowKindS3     = "s3"
	StowKindGoogle = "google"
	StowKindAzure  = "azure"
	StowKindLocal  = "local"
)

// StorageConfig is the `storage` section. The executor reads the task's
// inputs, the runtime's error.pb and checks outputs at the URIs a TaskAction
// names, which its author chooses: it reaches only the locations this section
// allows (AllowedLocations: Container on the primary scheme, and
// AllowedContainers), so a TaskAction cannot make it read or write, with its
// own credentials, a bucket or a file it was not given. An allowed location
// is opened with the settings of its scheme: Schemes[scheme] if present,
// else, for the primary scheme (the one Type and Stow.Kind name),
// Stow.Config, else the platform's default credentials.
type StorageConfig struct {
	// Type is s3, minio, local or stow (Flyte also knows mem and redis, which
	// hold nothing a task's pod can share with the executor).
	Type string `json:"type,omitempty"`
	// Container is Flyte's metadata bucket, on the primary scheme (for
	// local, a directory under stow.config.path): the location the executor
	// reads and writes by default.
	Container string `json:"container,omitempty"`
	// EnableMultiContainer is Flyte's switch to reach any bucket a URI
	// names. It is accepted and widens nothing here: list the other buckets
	// in AllowedContainers.
	EnableMultiContainer bool `json:"enable-multicontainer,omitempty"`
	// AllowedContainers are the locations, beyond Container, the executor may
	// read and write: each a URI of a bucket, or of a folder in one (then
	// only keys under that folder): s3://bucket, gs://bucket/folder,
	// abfs://container@account.dfs.core.windows.net (abfs://container: the
	// configured account), azblob://container, file:///absolute/dir, or
	// file://name (the directory name under the local root, stow.config.path).
	// No wildcards.
	AllowedContainers []string   `json:"allowed-containers,omitempty"`
	Stow              StowConfig `json:"stow,omitempty"`
	// Schemes overrides the backend of a URI scheme (e.g. "gs" next to a
	// primary "s3").
	Schemes           map[string]StowConfig   `json:"schemes,omitempty"`
	Limits            StorageLimits           `json:"limits,omitempty"`
	DefaultHTTPClient StorageHTTPClientConfig `json:"defaultHttpClient,omitempty"`

	// Accepted so that Flyte's section loads; the executor has no use for them.
	Cache     map[string]any `json:"cache,omitempty"`
	SignedURL map[string]any `json:"signedUrl,omitempty"`
	Redis     map[string]any `json:"redis,omitempty"`
}

// StowConfig names a backend kind and its settings, with stow's keys:
//   - s3: region, endpoint, auth_type (iam | accesskey), access_key_id,
//     secret_key, secret_key_path, disable_ssl, v2_signing
//   - google: json (a service-account key; empty: default credentials), project_id, scopes
//   - azure: account, key (empty: default credentials), configDomainSuffix
//   - local: path (the root of file:// URIs that name a bucket)
type StowConfig struct {
	Kind   string            `json:"kind,omitempty"`
	Config map[string]string `json:"config,omitempty"`
}

// StorageLimits bound what the executor reads.
type StorageLimits struct {
	// GetLimitMegabytes is the largest object read; Flyte's default is 2.
	GetLimitMegabytes int64 `json:"maxDownloadMBs,omitempty"`
}

// StorageHTTPClientConfig tunes the HTTP client of the cloud backends.
type StorageHTTPClientConfig struct {
	// Timeout bounds one request; 0: only the caller's context does.
	Timeout Duration `json:"timeout,omitempty"`
	// Headers are added to every request.
	Headers map[string][]string `json:"headers,omitempty"`
}

// DefaultStorageGetLimitMegabytes is Flyte's default read limit.
const DefaultStorageGetLimitMegabytes = 2

var schemeKinds = map[string]string{
	"s3": StowKindS3, "gs": StowKindGoogle,
	"abfs": StowKindAzure, "abfss": StowKindAzure, "azblob": StowKindAzure,
	"file": StowKindLocal,
}

// StorageSchemes are the URI schemes the executor can read.
func StorageSchemes() []string {
	out := make([]string, 0, len(schemeKinds))
	for s := range schemeKinds {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// PrimaryKind is the stow kind Type and Stow name: what Stow.Config configures.
func (c StorageConfig) PrimaryKind() string {
	switch c.Type {
	case StorageTypeS3, StorageTypeMinio:
		return StowKindS3
	case StorageTypeLocal:
		return StowKindLocal
	case StorageTypeStow, "":
		if c.Stow.Kind == "" {
			return StowKindS3 // as Flyte defaults a missing stow kind
		}
		return c.Stow.Kind
	}
	return ""
}

// Backend is the kind and settings that open a URI of scheme.
func (c StorageConfig) Backend(scheme string) (kind string, settings map[string]string, err error) {
	def, known := schemeKinds[scheme]
	if !known {
		return "", nil, fmt.Errorf("storage: unsupported URI scheme %q (supported: %s)", scheme, strings.Join(StorageSchemes(), ", "))
	}
	if o, ok := c.Schemes[scheme]; ok {
		if o.Kind == "" {
			o.Kind = def
		}
		return o.Kind, o.Config, nil
	}
	if c.PrimaryKind() == def {
		return def, c.Stow.Config, nil
	}
	return def, nil, nil
}

// Keys that allow a location, as errors name them.
const (
	StorageContainerKey         = "storage.container"
	StorageAllowedContainersKey = "storage.allowed-containers"
)

// StorageLocation is a location the executor may read and write: a bucket,
// or a folder of one.
type StorageLocation struct {
	// Scheme is the URI scheme: s3, gs, abfs, abfss, azblob or file.
	Scheme string
	// Bucket is the bucket (the container, for Azure); for file, the
	// location's absolute directory.
	Bucket string
	// Account is the Azure storage account (the configured one when the
	// entry names none), in lower case; empty for other schemes.
	Account string
	// Prefix is the folder inside Bucket, without slashes at either end;
	// empty: the whole bucket. Always empty for file.
	Prefix string
	// Entry is the location as configured and Key the key that configured it
	// (StorageContainerKey or StorageAllowedContainersKey).
	Entry, Key string
}

// String is the location as a URI.
func (l StorageLocation) String() string {
	if l.Scheme == "file" {
		return "file://" + l.Bucket
	}
	out := l.Scheme + "://" + l.Bucket
	if l.Account != "" && (l.Scheme == "abfs" || l.Scheme == "abfss") {
		out = l.Scheme + "://" + l.Bucket + "@" + l.Account + ".dfs.core.windows.net"
	}
	if l.Prefix != "" {
		out += "/" + l.Prefix + "/"
	}
	return out
}

// primarySchemes are the URI schemes of a stow kind's buckets.
var primarySchemes = map[string][]string{
	StowKindS3: {"s3"}, StowKindGoogle: {"gs"}, StowKindAzure: {"abfs", "abfss", "azblob"}, StowKindLocal: {"file"},
}

// AllowedLocations are the locations the executor may read and write:
// Container on the primary scheme (each of abfs, abfss and azblob for
// Azure), then each of AllowedContainers. Nothing else: no storage section
// allows nothing, and file:// only what a local container or an entry names.
func (c StorageConfig) AllowedLocations() ([]StorageLocation, error) {
	var out []StorageLocation
	var errs []error
	if c.Container != "" {
		for _, scheme := range primarySchemes[c.PrimaryKind()] {
			// As Flyte names a container: scheme://container (file://name is
			// under the local root, file:///dir an absolute directory).
			l, err := c.parseLocation(scheme+"://"+c.Container, StorageContainerKey)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s %q: %w", StorageContainerKey, c.Container, err))
				continue
			}
			l.Entry = c.Container
			out = append(out, l)
		}
	}
	for _, e := range c.AllowedContainers {
		l, err := c.parseLocation(e, StorageAllowedContainersKey)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", StorageAllowedContainersKey, e, err))
			continue
		}
		out = append(out, l)
	}
	return out, errors.Join(errs...)
}

// LocalRoot is the directory under which file://name URIs live (the local
// backend's path), made absolute; empty when none is configured.
func (c StorageConfig) LocalRoot() string {
	_, settings, _ := c.Backend("file")
	root := settings["path"]
	if root == "" {
		return ""
	}
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	return filepath.ToSlash(filepath.Clean(root))
}

// AzureAccount is the storage account that URIs of scheme naming none mean.
func (c StorageConfig) AzureAccount(scheme string) string {
	_, settings, _ := c.Backend(scheme)
	return strings.ToLower(settings["account"])
}

// parseLocation reads one allowed location.
func (c StorageConfig) parseLocation(entry, key string) (StorageLocation, error) {
	if strings.ContainsAny(entry, "*?[") {
		return StorageLocation{}, errors.New("wildcards are not supported: list each bucket")
	}
	u, err := url.Parse(entry)
	if err != nil {
		return StorageLocation{}, fmt.Errorf("not a URI: %w", err)
	}
	kind, known := schemeKinds[u.Scheme]
	if u.Scheme == "" || !known {
		return StorageLocation{}, fmt.Errorf("want scheme://bucket with a scheme of %s", strings.Join(StorageSchemes(), ", "))
	}
	if u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return StorageLocation{}, errors.New("want scheme://bucket[/folder], without query or fragment")
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == "." || seg == ".." {
			return StorageLocation{}, errors.New("a path with . or .. segments")
		}
	}
	l := StorageLocation{Scheme: u.Scheme, Entry: entry, Key: key}
	if kind == StowKindLocal {
		if k, _, _ := c.Backend(u.Scheme); k != StowKindLocal {
			return StorageLocation{}, fmt.Errorf("file URIs are local paths, but the file scheme's backend is %q", k)
		}
		if u.User != nil {
			return StorageLocation{}, errors.New("a file URI names no user")
		}
		dir := path.Clean("/" + u.Path)
		if u.Host != "" {
			root := c.LocalRoot()
			if root == "" {
				return StorageLocation{}, fmt.Errorf("file://%s names a directory under the local root, and none is configured "+
					"(storage.stow.config.path with type local, or storage.schemes.file.config.path); or write it as file:///absolute/dir", u.Host)
			}
			dir = path.Join(root, u.Host, u.Path)
		} else if dir == "/" {
			return StorageLocation{}, errors.New("names the whole filesystem: name a directory")
		}
		l.Bucket = dir
		return l, nil
	}
	l.Bucket = u.Host
	switch {
	case kind == StowKindAzure && u.User != nil:
		if u.Scheme == "azblob" {
			return StorageLocation{}, errors.New("azblob://container names no account: use abfs://container@account.dfs.core.windows.net")
		}
		l.Bucket = u.User.Username()
		l.Account, _, _ = strings.Cut(strings.ToLower(u.Host), ".")
	case kind == StowKindAzure:
		l.Account = c.AzureAccount(u.Scheme)
	case u.User != nil:
		return StorageLocation{}, errors.New("want scheme://bucket[/folder], without a user")
	}
	if l.Bucket == "" || strings.Contains(l.Bucket, ":") {
		return StorageLocation{}, errors.New("names no bucket (want scheme://bucket[/folder])")
	}
	l.Prefix = strings.Trim(u.Path, "/")
	return l, nil
}

// GetLimitBytes is the read limit in bytes.
func (c StorageConfig) GetLimitBytes() int64 {
	mb := c.Limits.GetLimitMegabytes
	if mb <= 0 {
		mb = DefaultStorageGetLimitMegabytes
	}
	return mb << 20
}

// Validate checks what can be checked without reaching the backend.
func (c StorageConfig) Validate() error {
	var errs []error
	switch c.Type {
	case "", StorageTypeS3, StorageTypeMinio, StorageTypeLocal, StorageTypeStow:
	default:
		errs = append(errs, fmt.Errorf("storage.type %q: want s3, minio, local or stow", c.Type))
	}
	check := func(where string, s StowConfig) {
		switch s.Kind {
		case "", StowKindS3, StowKindGoogle, StowKindAzure, StowKindLocal:
		default:
			errs = append(errs, fmt.Errorf("%s.kind %q: want s3, google, azure or local", where, s.Kind))
		}
		if s.Kind == StowKindS3 || (s.Kind == "" && where == "storage.stow") {
			switch t := s.Config["auth_type"]; t {
			case "", "iam", "accesskey":
			default:
				errs = append(errs, fmt.Errorf("%s.config.auth_type %q: want iam or accesskey", where, t))
			}
		}
	}
	check("storage.stow", c.Stow)
	for scheme, s := range c.Schemes {
		if _, ok := schemeKinds[scheme]; !ok {
			errs = append(errs, fmt.Errorf("storage.schemes: unsupported URI scheme %q", scheme))
		}
		check("storage.schemes."+scheme, s)
		if scheme == "file" && s.Kind != "" && s.Kind != StowKindLocal {
			errs = append(errs, fmt.Errorf("storage.schemes.file.kind %q: file URIs are local paths (want local)", s.Kind))
		}
	}
	if _, err := c.AllowedLocations(); err != nil {
		errs = append(errs, err)
	}
	if c.Limits.GetLimitMegabytes < 0 {
		errs = append(errs, errors.New("storage.limits.maxDownloadMBs must not be negative"))
	}
	if c.DefaultHTTPClient.Timeout.Duration < 0 {
		errs = append(errs, errors.New("storage.defaultHttpClient.timeout must not be negative"))
	}
	return errors.Join(errs...)
}
