// Command image builds the executor's container image without a container
// engine: a static binary and a CA bundle on an empty base, written as a
// tarball that `docker load`, `kind load image-archive` and `crane push`
// accept. The same commit gives the same bytes and digest (`make image`).
//
// It is a module of its own under hack/, so that go-containerregistry is
// neither in the executor's go.mod nor in its binary.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run() error {
	var o Options
	var epoch string
	var worktree bool
	flag.StringVar(&o.Src, "src", "", "git work tree of the executor (default: the one holding the current directory)")
	flag.BoolVar(&worktree, "worktree", false, "build the work tree as it is, uncommitted changes included, instead of the commit")
	flag.StringVar(&o.Out, "o", "", "image tarball to write")
	flag.StringVar(&o.BinaryOut, "binary-out", "", "also keep the built binary here")
	flag.StringVar(&o.Tag, "tag", "", "repository:tag recorded in the tarball (default ghcr.io/taskaction/executor:<version>)")
	flag.StringVar(&o.Arch, "arch", "amd64", "GOARCH of the image (GOOS is linux)")
	flag.StringVar(&o.Source, "source", "https://github.com/taskaction/executor", "org.opencontainers.image.source")
	flag.StringVar(&o.Revision, "revision", "", "commit of the image (default: git rev-parse HEAD)")
	flag.StringVar(&o.Version, "version", "", "version label (default: git describe --tags --always --dirty)")
	flag.StringVar(&epoch, "epoch", os.Getenv("SOURCE_DATE_EPOCH"), "timestamp of every file and of the image, in Unix seconds (default: $SOURCE_DATE_EPOCH, else the commit's time)")
	flag.Parse()
	if o.Out == "" {
		return fmt.Errorf("-o is required")
	}
	var err error
	if o.Src == "" {
		if o.Src, err = git(".", "rev-parse", "--show-toplevel"); err != nil {
			return err
		}
	}
	if o.Revision == "" {
		if o.Revision, err = git(o.Src, "rev-parse", "HEAD"); err != nil {
			return err
		}
	}
	if o.Version == "" {
		args := []string{"describe", "--tags", "--always"}
		if worktree {
			args = append(args, "--dirty")
		}
		if o.Version, err = git(o.Src, append(args, o.Revision)...); err != nil {
			return err
		}
	}
	if epoch == "" {
		if epoch, err = git(o.Src, "log", "-1", "--format=%ct", o.Revision); err != nil {
			return err
		}
	}
	if o.Epoch, err = strconv.ParseInt(epoch, 10, 64); err != nil {
		return fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", epoch, err)
	}
	if o.Tag == "" {
		o.Tag = "ghcr.io/taskaction/executor:" + o.Version
	}
	if worktree {
		if strings.HasSuffix(o.Version, "-dirty") {
			fmt.Fprintln(os.Stderr, "image: warning: the work tree has uncommitted changes; this image is not the commit's")
		}
	} else {
		// The commit's files, not the work tree's: the image is the commit's
		// whatever else the work tree holds.
		dir, err := os.MkdirTemp("", "executor-src-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if err := Export(o.Src, o.Revision, dir); err != nil {
			return err
		}
		o.Src = dir
	}
	o.Log = os.Stderr
	res, err := Build(context.Background(), o)
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s %s (linux/%s, revision %s, %d CA certificates)\n", o.Out, o.Tag, res.Digest, o.Arch, o.Revision, res.CACerts)
	return nil
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = strings.TrimSpace(string(ee.Stderr))
		}
		return "", fmt.Errorf("git %s: %v %s", strings.Join(args, " "), err, stderr)
	}
	return strings.TrimSpace(string(out)), nil
}
