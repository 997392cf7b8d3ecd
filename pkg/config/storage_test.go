package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// A storage section as Flyte's flyte-binary chart writes it loads as is.
const flyteStorageSection = `
type: stow
stow:
  kind: s3
  config:
    region: us-east-1
    disable_ssl: false
    v2_signing: false
    endpoint: http://minio.flyte.svc:9000
    auth_type: accesskey
    access_key_id: minio
    secret_key: miniostorage
container: my-organization-flyte-container
cache:
  max_size_mbs: 10
  target_gc_percent: 100
limits:
  maxDownloadMBs: 10
signedUrl:
  stowConfigOverride:
    endpoint: http://localhost:30002
schemes:
  gs:
    config:
      project_id: p
`

func TestStorageSectionOfFlyte(t *testing.T) {
	var c StorageConfig
	if err := yaml.UnmarshalStrict([]byte(flyteStorageSection), &c); err != nil {
		t.Fatalf("Flyte's storage section does not load: %v", err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.GetLimitBytes() != 10<<20 {
		t.Errorf("limit %d", c.GetLimitBytes())
	}
	for _, tc := range []struct {
		scheme, kind, key, value string
	}{
		{"s3", StowKindS3, "access_key_id", "minio"},
		{"gs", StowKindGoogle, "project_id", "p"},
		{"abfs", StowKindAzure, "", ""},
		{"file", StowKindLocal, "", ""},
	} {
		kind, settings, err := c.Backend(tc.scheme)
		if err != nil || kind != tc.kind || settings[tc.key] != tc.value {
			t.Errorf("Backend(%s) = %s %v %v; want %s with %s=%q", tc.scheme, kind, settings, err, tc.kind, tc.key, tc.value)
		}
	}
	if _, _, err := c.Backend("ftp"); err == nil {
		t.Error("Backend(ftp): want an error")
	}
}

func TestStoragePrimaryKind(t *testing.T) {
	for _, tc := range []struct {
		c    StorageConfig
		want string
	}{
		{StorageConfig{}, StowKindS3},
		{StorageConfig{Type: StorageTypeMinio}, StowKindS3},
		{StorageConfig{Type: StorageTypeLocal}, StowKindLocal},
		{StorageConfig{Type: StorageTypeStow, Stow: StowConfig{Kind: StowKindGoogle}}, StowKindGoogle},
		{StorageConfig{Type: StorageTypeStow, Stow: StowConfig{Kind: StowKindAzure}}, StowKindAzure},
	} {
		if got := tc.c.PrimaryKind(); got != tc.want {
			t.Errorf("%+v: PrimaryKind = %s, want %s", tc.c, got, tc.want)
		}
	}
}

func TestStorageValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    StorageConfig
		want string
	}{
		{"unknown type", StorageConfig{Type: "mem"}, "storage.type"},
		{"unknown kind", StorageConfig{Stow: StowConfig{Kind: "oracle"}}, "storage.stow.kind"},
		{"bad auth type", StorageConfig{Stow: StowConfig{Kind: "s3", Config: map[string]string{"auth_type": "x"}}}, "auth_type"},
		{"unknown scheme", StorageConfig{Schemes: map[string]StowConfig{"ftp": {}}}, "unsupported URI scheme"},
		{"negative limit", StorageConfig{Limits: StorageLimits{GetLimitMegabytes: -1}}, "maxDownloadMBs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// The locations the executor may reach: the container on the primary
// scheme, then allowed-containers; nothing without them.
func TestStorageAllowedLocations(t *testing.T) {
	root := t.TempDir()
	local := StowConfig{Kind: StowKindLocal, Config: map[string]string{"path": root}}
	azure := StowConfig{Kind: StowKindAzure, Config: map[string]string{"account": "Ours"}}
	for _, tc := range []struct {
		name string
		c    StorageConfig
		want []string // StorageLocation.String() (key)
	}{
		{"no storage section allows nothing", StorageConfig{}, nil},
		{"a type without a container allows nothing", StorageConfig{Type: StorageTypeLocal, Stow: local}, nil},
		{"s3", StorageConfig{Type: StorageTypeS3, Container: "meta"}, []string{"s3://meta (storage.container)"}},
		{"minio", StorageConfig{Type: StorageTypeMinio, Container: "meta"}, []string{"s3://meta (storage.container)"}},
		{"stow google", StorageConfig{Type: StorageTypeStow, Container: "meta", Stow: StowConfig{Kind: StowKindGoogle}},
			[]string{"gs://meta (storage.container)"}},
		{"stow azure: every scheme of the configured account", StorageConfig{Type: StorageTypeStow, Container: "meta", Stow: azure},
			[]string{"abfs://meta@ours.dfs.core.windows.net (storage.container)", "abfss://meta@ours.dfs.core.windows.net (storage.container)",
				"azblob://meta (storage.container)"}},
		{"local: a directory under the root", StorageConfig{Type: StorageTypeLocal, Container: "meta", Stow: local},
			[]string{"file://" + root + "/meta (storage.container)"}},
		{"local: an absolute directory", StorageConfig{Type: StorageTypeLocal, Container: "/srv/flyte", Stow: local},
			[]string{"file:///srv/flyte (storage.container)"}},
		{"extra entries", StorageConfig{Type: StorageTypeS3, Container: "meta", Stow: StowConfig{Kind: StowKindS3},
			Schemes:           map[string]StowConfig{"file": local},
			AllowedContainers: []string{"s3://other", "gs://shared/flyte/", "file:///data/x/", "file://named", "abfs://c@acct.dfs.core.windows.net/f"}},
			[]string{"s3://meta (storage.container)", "s3://other (storage.allowed-containers)", "gs://shared/flyte/ (storage.allowed-containers)",
				"file:///data/x (storage.allowed-containers)", "file://" + root + "/named (storage.allowed-containers)",
				"abfs://c@acct.dfs.core.windows.net/f/ (storage.allowed-containers)"}},
		{"enable-multicontainer widens nothing", StorageConfig{Type: StorageTypeS3, Container: "meta", EnableMultiContainer: true},
			[]string{"s3://meta (storage.container)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.c.Validate(); err != nil {
				t.Fatal(err)
			}
			got, err := tc.c.AllowedLocations()
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, l := range got {
				s = append(s, l.String()+" ("+l.Key+")")
			}
			if strings.Join(s, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", strings.Join(s, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestStorageAllowedContainersValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    StorageConfig
		want string
	}{
		{"a wildcard", StorageConfig{AllowedContainers: []string{"s3://*"}}, `storage.allowed-containers "s3://*": wildcards are not supported`},
		{"no scheme", StorageConfig{AllowedContainers: []string{"bucket"}}, `"bucket": want scheme://bucket`},
		{"an unknown scheme", StorageConfig{AllowedContainers: []string{"ftp://b"}}, `"ftp://b": want scheme://bucket`},
		{"no bucket", StorageConfig{AllowedContainers: []string{"s3:///x"}}, "names no bucket"},
		{"dot segments", StorageConfig{AllowedContainers: []string{"s3://b/x/../y"}}, ". or .. segments"},
		{"the whole filesystem", StorageConfig{AllowedContainers: []string{"file:///"}}, "whole filesystem"},
		{"a named directory without a root", StorageConfig{AllowedContainers: []string{"file://named"}}, "local root"},
		{"a local container without a root", StorageConfig{Type: StorageTypeLocal, Container: "meta"}, `storage.container "meta": file://meta names a directory under the local root`},
		{"azblob with an account", StorageConfig{AllowedContainers: []string{"azblob://c@acct"}}, "names no account"},
		{"a file scheme that is not local", StorageConfig{Schemes: map[string]StowConfig{"file": {Kind: StowKindS3}}}, "storage.schemes.file.kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// The key loads from YAML with Flyte's spelling style (kebab-case).
func TestStorageAllowedContainersLoads(t *testing.T) {
	var c StorageConfig
	if err := yaml.UnmarshalStrict([]byte(flyteStorageSection+"allowed-containers: [s3://raw-data, gs://other]\n"), &c); err != nil {
		t.Fatal(err)
	}
	got, err := c.AllowedLocations()
	if err != nil || len(got) != 3 || got[0].String() != "s3://my-organization-flyte-container" || got[2].String() != "gs://other" {
		t.Fatalf("got %v, %v", got, err)
	}
}

// Through the loader, allowed-containers reads as Flyte's loader would read
// such a key: any case, a list, or one comma-separated string; and a bad
// entry is refused by the same validation as every key.
func TestStorageAllowedContainersThroughLoad(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, yaml, want, wantErr string }{
		{"a list", "storage:\n  container: meta\n  allowed-containers: [s3://a, gs://b]\n", "s3://meta s3://a gs://b", ""},
		{"a comma-separated string, another case", "storage:\n  container: meta\n  Allowed-Containers: s3://a,gs://b\n", "s3://meta s3://a gs://b", ""},
		{"a wildcard", "storage:\n  allowed-containers: [\"s3://*\"]\n", "", `storage.allowed-containers: "s3://*": wildcards are not supported`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := Load(path, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			locs, err := c.Storage.AllowedLocations()
			var got []string
			for _, l := range locs {
				got = append(got, l.String())
			}
			if err != nil || strings.Join(got, " ") != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
