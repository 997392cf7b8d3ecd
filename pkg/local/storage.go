package local

import (
	"reflect"
	"strings"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/storage"
)

// BucketDir is the directory, inside the data directory, that serves as the
// blob store of `executor local`: tasks and the executor share it through
// file:// URIs, since the local node runs pods as processes on this machine.
const BucketDir = "bucket"

// StorageConfig is the storage section `executor local` gives the executor:
// the container BucketDir under the data directory (file://bucket/... is
// <dataDir>/bucket/...), and nothing else of the filesystem.
func StorageConfig(dataDir string) config.StorageConfig {
	return config.StorageConfig{
		Type:      config.StorageTypeLocal,
		Container: BucketDir,
		Stow:      config.StowConfig{Kind: config.StowKindLocal, Config: map[string]string{"path": dataDir}},
	}
}

// BucketURI is the URI of the local bucket, to use as a run's base (inputs
// and outputs of the demo's tasks): file://bucket, the container named in
// the URI's host as in Flyte's URIs, so that an attempt's output prefix
// (Flyte's shard right after the bucket) stays inside it. It is the same for
// every data directory (StorageConfig says which directory it is).
func BucketURI(string) string { return "file://" + BucketDir }

// StorageConfigured says whether a storage section was given (anything
// beyond the defaults, which are Flyte's: S3 with no bucket): `executor
// local` keeps it then.
func StorageConfigured(c config.StorageConfig) bool {
	return !reflect.DeepEqual(c, config.Default().Storage)
}

// RebaseSample moves a sample's inputUri and runOutputBase into the bucket
// at base (BucketURI): the samples name a cloud bucket, which the local node
// has not; their paths inside the bucket are kept.
func RebaseSample(ta *flytev1.TaskAction, base string) {
	ta.Spec.InputURI = rebase(ta.Spec.InputURI, base)
	ta.Spec.RunOutputBase = rebase(ta.Spec.RunOutputBase, base)
}

func rebase(uri, base string) string {
	loc, err := storage.ParseURI(uri)
	if err != nil || uri == "" {
		return uri
	}
	out := strings.TrimRight(base, "/") + "/" + strings.TrimLeft(loc.Key, "/")
	if strings.HasSuffix(uri, "/") && !strings.HasSuffix(out, "/") {
		out += "/"
	}
	return out
}
