package local

import (
	"path/filepath"

	"github.com/taskaction/executor/pkg/config"
)

// BucketDir is the directory, inside the data directory, that serves as the
// blob store of `executor local`: tasks and the executor share it through
// file:// URIs, since the local node runs pods as processes on this machine.
const BucketDir = "bucket"

// StorageConfig is the storage section `executor local` gives the executor:
// file:///<dataDir>/bucket/... URIs are plain paths, and file://<name>/...
// URIs live in <dataDir>/bucket/<name>.
func StorageConfig(dataDir string) config.StorageConfig {
	root := filepath.Join(dataDir, BucketDir)
	return config.StorageConfig{
		Type:      config.StorageTypeLocal,
		Container: BucketDir,
		Stow:      config.StowConfig{Kind: config.StowKindLocal, Config: map[string]string{"path": root}},
	}
}

// BucketURI is the file:// URI of the local bucket, to use as a run's base
// (inputs and outputs of the demo's tasks).
func BucketURI(dataDir string) string {
	return "file://" + filepath.ToSlash(filepath.Join(dataDir, BucketDir))
}
