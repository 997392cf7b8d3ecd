package config

import (
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
