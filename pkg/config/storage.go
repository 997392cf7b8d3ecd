package config

import (
	"errors"
	"fmt"
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
// inputs, the runtime's error.pb and checks outputs at the URIs Flyte puts in
// a TaskAction; every scheme it meets (s3, gs, abfs/abfss/azblob, file) is
// opened with the settings of its scheme: Schemes[scheme] if present, else,
// for the primary scheme (the one Type and Stow.Kind name), Stow.Config, else
// the platform's default credentials.
type StorageConfig struct {
	// Type is s3, minio, local or stow (Flyte also knows mem and redis, which
	// hold nothing a task's pod can share with the executor).
	Type string `json:"type,omitempty"`
	// Container is Flyte's metadata bucket. Only checked for presence, as Flyte does.
	Container string `json:"container,omitempty"`
	// EnableMultiContainer lets URIs name other buckets than Container; the
	// executor opens whatever bucket a URI names either way.
	EnableMultiContainer bool       `json:"enable-multicontainer,omitempty"`
	Stow                 StowConfig `json:"stow,omitempty"`
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
	}
	if c.Limits.GetLimitMegabytes < 0 {
		errs = append(errs, errors.New("storage.limits.maxDownloadMBs must not be negative"))
	}
	if c.DefaultHTTPClient.Timeout.Duration < 0 {
		errs = append(errs, errors.New("storage.defaultHttpClient.timeout must not be negative"))
	}
	return errors.Join(errs...)
}
