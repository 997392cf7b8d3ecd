package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The image's fixed facts; the test reads them back from the tarball.
const (
	Entrypoint = "/executor"
	User       = "65532:65532"
	CAFile     = "etc/ssl/certs/ca-certificates.crt"

	LabelSource   = "org.opencontainers.image.source"
	LabelRevision = "org.opencontainers.image.revision"
	LabelVersion  = "org.opencontainers.image.version"
	LabelCreated  = "org.opencontainers.image.created"
	LabelTitle    = "org.opencontainers.image.title"
)

// Options are the inputs of one build. Everything that ends up in the image
// comes from them, the source tree, the Go toolchain and the go.sum-pinned
// modules: nothing from the clock or the machine.
type Options struct {
	Src       string // module root holding ./cmd/executor
	Out       string // the image tarball (docker save format)
	BinaryOut string // where to keep the built binary; empty: a temporary file
	Tag       string // repository:tag recorded in the tarball for docker load
	Arch      string // GOARCH (linux only)
	Source    string // org.opencontainers.image.source
	Revision  string // org.opencontainers.image.revision: the commit
	Version   string // org.opencontainers.image.version
	Epoch     int64  // SOURCE_DATE_EPOCH: every timestamp in the image
	Log       io.Writer
}

// Result is what a build produced.
type Result struct {
	// Digest is the manifest digest: what `crane push` of the tarball, and so
	// the registry, reports for it.
	Digest       v1.Hash
	ConfigDigest v1.Hash // the image ID docker load shows
	Binary       string  // path of the binary in the layer
	CACerts      int     // certificates in the CA bundle
}

// Build compiles the executor and writes its image tarball.
func Build(ctx context.Context, o Options) (Result, error) {
	if o.Src == "" || o.Out == "" || o.Tag == "" || o.Revision == "" || o.Version == "" {
		return Result{}, errors.New("src, out, tag, revision and version are required")
	}
	if o.Epoch <= 0 {
		return Result{}, errors.New("a positive SOURCE_DATE_EPOCH is required")
	}
	if o.Arch == "" {
		o.Arch = "amd64"
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	tag, err := name.NewTag(o.Tag)
	if err != nil {
		return Result{}, fmt.Errorf("tag %q: %w", o.Tag, err)
	}
	bin := o.BinaryOut
	if bin == "" {
		dir, err := os.MkdirTemp("", "executor-image-")
		if err != nil {
			return Result{}, err
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "executor")
	}
	if err := BuildBinary(ctx, o.Src, o.Arch, bin, o.Log); err != nil {
		return Result{}, err
	}
	exe, err := os.ReadFile(bin)
	if err != nil {
		return Result{}, err
	}
	ca, n, err := CABundle()
	if err != nil {
		return Result{}, err
	}
	created := time.Unix(o.Epoch, 0).UTC()
	layerTar, err := Layer(exe, ca, created)
	if err != nil {
		return Result{}, err
	}
	img, err := Image(layerTar, o, created)
	if err != nil {
		return Result{}, err
	}
	if err := writeTarball(o.Out, tag, img); err != nil {
		return Result{}, err
	}
	d, err := img.Digest()
	if err != nil {
		return Result{}, err
	}
	cd, err := img.ConfigName()
	if err != nil {
		return Result{}, err
	}
	return Result{Digest: d, ConfigDigest: cd, Binary: bin, CACerts: n}, nil
}

// BuildBinary builds ./cmd/executor of src as a static linux binary. The
// environment's Go settings that change the output (GOFLAGS, GOAMD64, cgo,
// experiments) are replaced so that the binary depends on the source alone;
// -trimpath keeps the build directory out of it, -buildvcs=false the working
// tree's state (the commit is in the image's labels instead).
func BuildBinary(ctx context.Context, src, arch, out string, log io.Writer) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w",
		"-o", out, "./cmd/executor")
	cmd.Dir = src
	cmd.Env = append(filterEnv(os.Environ(), "GOFLAGS", "GOOS", "GOARCH", "GOAMD64", "GOARM64", "GO386", "GOEXPERIMENT",
		"CGO_ENABLED", "CGO_CFLAGS", "CGO_LDFLAGS", "GOTOOLCHAIN"),
		"CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch, "GOFLAGS=-mod=readonly", "GOTOOLCHAIN=local")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/executor in %s: %w", src, err)
	}
	return nil
}

func filterEnv(env []string, drop ...string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, d := range drop {
			if k == d {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}

// CABundle is the Mozilla (NSS) root store as golang.org/x/crypto/x509roots
// ships it, PEM-encoded in the module's order: pinned by go.sum, so the same
// commit gives the same file on any machine (the builder's /etc/ssl/certs
// would make the image depend on that machine's packages). Roots that carry
// a constraint (a distrust-after date) are left out: a PEM file cannot carry
// the constraint, and without it they would be trusted for everything.
func CABundle() ([]byte, int, error) {
	var buf bytes.Buffer
	n := 0
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		if err := pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			return nil, 0, err
		}
		n++
	}
	if n == 0 {
		return nil, 0, errors.New("the CA bundle module has no unconstrained roots")
	}
	return buf.Bytes(), n, nil
}

// entry is one file or directory of the layer.
type entry struct {
	name     string
	mode     int64
	uid, gid int
	data     []byte
	dir      bool
}

// Layer is the image's only layer, as an uncompressed tar: the binary, the
// CA bundle, passwd and group entries for the numeric user (so that tools
// show a name), its home and /tmp. Entries are sorted, owned by numbers
// without names and dated created, so the bytes depend on the inputs alone.
// There is no shell and nothing else to execute.
func Layer(exe, ca []byte, created time.Time) ([]byte, error) {
	entries := []entry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: CAFile, mode: 0o644, data: ca},
		{name: strings.TrimPrefix(Entrypoint, "/"), mode: 0o755, data: exe},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, uid: 65532, gid: 65532, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name:    e.name,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.gid,
			ModTime: created,
			Format:  tar.FormatPAX,
		}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Image assembles the image on an empty base. The manifest and layers use
// Docker's schema-2 media types: the tarball format docker load, kind and
// crane read has no room for a manifest, and crane push rebuilds a schema-2
// manifest from it, so these types make the digest printed here the one a
// registry reports after the push. The config is an OCI image config.
func Image(layerTar []byte, o Options, created time.Time) (v1.Image, error) {
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.DockerLayer))
	if err != nil {
		return nil, err
	}
	ts := v1.Time{Time: created}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer:     layer,
		MediaType: types.DockerLayer,
		History:   v1.History{Created: ts, CreatedBy: "hack/image: " + Entrypoint + " and " + "/" + CAFile, Comment: "built by hack/image"},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture = o.Arch
	cf.OS = "linux"
	cf.Created = ts
	cf.Author = ""
	cf.Config = v1.Config{
		Entrypoint: []string{Entrypoint},
		User:       User,
		WorkingDir: "/",
		Labels: map[string]string{
			LabelSource:   o.Source,
			LabelRevision: o.Revision,
			LabelVersion:  o.Version,
			LabelCreated:  created.Format(time.RFC3339),
			LabelTitle:    "executor",
		},
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	img = mutate.MediaType(img, types.DockerManifestSchema2)
	img = mutate.ConfigMediaType(img, types.DockerConfigJSON)
	return img, nil
}

// writeTarball writes through a temporary file, so that a failed build
// leaves no half-written tarball behind.
func writeTarball(path string, tag name.Tag, img v1.Image) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".executor-image-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tarball.Write(tag, img, tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Export writes the files of commit rev of the git repository at repo into
// dir (git archive), so that a build sees the commit and nothing else.
func Export(repo, rev, dir string) error {
	cmd := exec.Command("git", "archive", "--format=tar", rev)
	cmd.Dir = repo
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	tr := tar.NewReader(out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			_ = cmd.Wait()
			return fmt.Errorf("git archive %s: %w", rev, err)
		}
		name := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(name, filepath.Clean(dir)+string(os.PathSeparator)) {
			continue // git archive writes no such path; skip it if it ever did
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(name, 0o755)
		case tar.TypeReg:
			err = writeFile(name, tr, os.FileMode(h.Mode).Perm())
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, name)
		}
		if err != nil {
			_ = cmd.Wait()
			return err
		}
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("git archive %s: %v %s", rev, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func writeFile(name string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
