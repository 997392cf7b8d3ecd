package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/x509"
	"debug/elf"
	"encoding/pem"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The layer's files, exactly: a shell or any other program would show here.
var wantFiles = map[string]int64{ // name → mode
	"etc/":                              0o755,
	"etc/group":                         0o644,
	"etc/passwd":                        0o644,
	"etc/ssl/":                          0o755,
	"etc/ssl/certs/":                    0o755,
	"etc/ssl/certs/ca-certificates.crt": 0o644,
	"executor":                          0o755,
	"home/":                             0o755,
	"home/nonroot/":                     0o700,
	"tmp/":                              0o1777,
}

type file struct {
	hdr  *tar.Header
	data []byte
}

func readTar(t *testing.T, r io.Reader) []file {
	t.Helper()
	tr := tar.NewReader(r)
	var out []file
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, file{h, b})
	}
}

// The layer and the image are functions of their inputs: the same binary,
// bundle and time give the same bytes and digest, and the time given is
// every timestamp (so SOURCE_DATE_EPOCH, not the clock, dates the image).
func TestLayerAndImageAreReproducible(t *testing.T) {
	exe := []byte("\x7fELF not really")
	ca, n, err := CABundle()
	if err != nil {
		t.Fatal(err)
	}
	if n < 100 {
		t.Fatalf("only %d CA certificates", n)
	}
	t0 := time.Unix(1_700_000_000, 0).UTC()
	o := Options{Arch: "amd64", Source: "https://example.invalid/src", Revision: "abc", Version: "v1"}
	digest := func(at time.Time, o Options) v1.Hash {
		l, err := Layer(exe, ca, at)
		if err != nil {
			t.Fatal(err)
		}
		img, err := Image(l, o, at)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a, b := digest(t0, o), digest(t0, o)
	if a != b {
		t.Fatalf("two builds of the same inputs: %s and %s", a, b)
	}
	if c := digest(t0.Add(time.Second), o); c == a {
		t.Error("the epoch does not change the digest: some timestamp is not the epoch")
	}
	o2 := o
	o2.Revision = "def"
	if c := digest(t0, o2); c == a {
		t.Error("the revision label does not change the digest")
	}
	l, err := Layer(exe, ca, t0)
	if err != nil {
		t.Fatal(err)
	}
	checkLayer(t, readTar(t, bytes.NewReader(l)), exe, t0)
}

func checkLayer(t *testing.T, files []file, exe []byte, at time.Time) {
	t.Helper()
	var names []string
	for _, f := range files {
		names = append(names, f.hdr.Name)
		want, ok := wantFiles[f.hdr.Name]
		if !ok {
			t.Errorf("unexpected file %s in the layer", f.hdr.Name)
			continue
		}
		if f.hdr.Mode != want {
			t.Errorf("%s: mode %o, want %o", f.hdr.Name, f.hdr.Mode, want)
		}
		if !f.hdr.ModTime.Equal(at) {
			t.Errorf("%s: mtime %v, want %v", f.hdr.Name, f.hdr.ModTime, at)
		}
		if f.hdr.Uname != "" || f.hdr.Gname != "" {
			t.Errorf("%s: owner names %q/%q", f.hdr.Name, f.hdr.Uname, f.hdr.Gname)
		}
		switch f.hdr.Name {
		case "executor":
			if !bytes.Equal(f.data, exe) {
				t.Error("/executor in the layer is not the binary that was built")
			}
		case CAFile:
			pool := 0
			for rest := f.data; ; {
				var blk *pem.Block
				blk, rest = pem.Decode(rest)
				if blk == nil {
					break
				}
				if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
					t.Fatalf("CA bundle: %v", err)
				}
				pool++
			}
			if pool < 100 {
				t.Errorf("CA bundle holds %d certificates", pool)
			}
		}
		if strings.HasSuffix(f.hdr.Name, "sh") || strings.Contains(f.hdr.Name, "bin/") {
			t.Errorf("%s looks like a shell or a bin directory", f.hdr.Name)
		}
	}
	if !sort.StringsAreSorted(names) || len(names) != len(wantFiles) {
		t.Errorf("layer entries %v: want the %d files, sorted", names, len(wantFiles))
	}
}

// `make image` of one commit: two builds give the same tarball and digest;
// read back from the tarball as `crane push` and `docker load` read it, the
// image is the static binary just built, the CA bundle and nothing else,
// runs /executor as 65532 with the OCI labels of the commit, dated by the
// commit's time.
func TestImageOfCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the executor")
	}
	repo := gitT(t, ".", "rev-parse", "--show-toplevel")
	rev := gitT(t, repo, "rev-parse", "HEAD")
	epoch, err := strconv.ParseInt(gitT(t, repo, "log", "-1", "--format=%ct", rev), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	// The commit's files, as `make image` builds them (the work tree may hold others' changes).
	src := t.TempDir()
	if err := Export(repo, rev, src); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	build := func(n string) (Result, string) {
		o := Options{
			Src: src, Out: filepath.Join(dir, n+".tar"), BinaryOut: filepath.Join(dir, n+".bin"),
			Tag: "ghcr.io/taskaction/executor:test", Arch: "amd64", Source: "https://github.com/taskaction/executor",
			Revision: rev, Version: "test", Epoch: epoch,
		}
		res, err := Build(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		return res, o.Out
	}
	r1, tar1 := build("one")
	r2, tar2 := build("two")
	if r1.Digest != r2.Digest {
		t.Fatalf("two builds of %s: digests %s and %s", rev, r1.Digest, r2.Digest)
	}
	b1, _ := os.ReadFile(tar1)
	b2, _ := os.ReadFile(tar2)
	if !bytes.Equal(b1, b2) {
		t.Error("two builds of one commit wrote different tarballs")
	}
	t.Logf("commit %s: image %s (config %s), %d bytes", rev, r1.Digest, r1.ConfigDigest, len(b1))

	img, err := tarball.ImageFromPath(tar1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := img.Digest(); err != nil || d != r1.Digest {
		t.Errorf("digest of the tarball as crane push reads it: %v %v, want %s", d, err, r1.Digest)
	}
	if mt, _ := img.MediaType(); mt != types.DockerManifestSchema2 {
		t.Errorf("media type %s", mt)
	}
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(tar1) })
	if err != nil || len(m) != 1 || !reflect.DeepEqual(m[0].RepoTags, []string{"ghcr.io/taskaction/executor:test"}) {
		t.Errorf("manifest.json (what docker load and kind read): %+v %v", m, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	created := time.Unix(epoch, 0).UTC()
	if !reflect.DeepEqual(cf.Config.Entrypoint, []string{"/executor"}) || len(cf.Config.Cmd) != 0 {
		t.Errorf("entrypoint %v, cmd %v", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user %q", cf.Config.User)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" || !cf.Created.Time.Equal(created) {
		t.Errorf("os %s, arch %s, created %v (want %v)", cf.OS, cf.Architecture, cf.Created, created)
	}
	wantLabels := map[string]string{
		LabelSource:   "https://github.com/taskaction/executor",
		LabelRevision: rev,
		LabelVersion:  "test",
		LabelCreated:  created.Format(time.RFC3339),
		LabelTitle:    "executor",
	}
	if !reflect.DeepEqual(cf.Config.Labels, wantLabels) {
		t.Errorf("labels %v, want %v", cf.Config.Labels, wantLabels)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	exe, err := os.ReadFile(r1.Binary)
	if err != nil {
		t.Fatal(err)
	}
	checkLayer(t, readTar(t, rc), exe, created)

	// Static: no interpreter, no shared library.
	f, err := elf.NewFile(bytes.NewReader(exe))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary asks for a dynamic loader")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) != 0 {
		t.Errorf("the binary needs %v", libs)
	}
	if f.Machine != elf.EM_X86_64 {
		t.Errorf("machine %v", f.Machine)
	}
	// One binary serves every subcommand: the image's binary answers `config` here.
	if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" {
		out, err := exec.Command(r1.Binary, "config").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "executor:\n") {
			t.Errorf("/executor config: %v\n%s", err, out)
		}
	}
}

func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	s, err := git(dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
