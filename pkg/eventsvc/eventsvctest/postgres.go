package eventsvctest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
)

// PostgresBinDir finds initdb and pg_ctl: $PG_BIN, else the newest
// /usr/lib/postgresql/*/bin (Debian), else $PATH.
func PostgresBinDir() (string, error) {
	if d := os.Getenv("PG_BIN"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(a, b int) bool { return versionOf(dirs[a]) > versionOf(dirs[b]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errNoPostgres
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// StartPostgres runs a throwaway PostgreSQL server on a free loopback port for
// the test and returns its DSN. Without the binaries it skips the test, except
// under CI=true, where it fails: CI must exercise PostgreSQL.
// As root it runs the server as the postgres user, since initdb refuses root.
func StartPostgres(t testing.TB) string {
	t.Helper()
	bin, err := PostgresBinDir()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL binaries not found (install postgresql or set PG_BIN): %v", err)
		}
		t.Skipf("skipping PostgreSQL test: no initdb/pg_ctl found under $PG_BIN, /usr/lib/postgresql/*/bin or $PATH")
	}
	// Not t.TempDir: its parent is private to root, and the server may run as postgres.
	dir, err := os.MkdirTemp("", "eventsvc-pg-")
	if err != nil {
		t.Fatalf("temp dir: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, sock := filepath.Join(dir, "data"), filepath.Join(dir, "sock")
	for _, d := range []string{data, sock} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	var asUser []string
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root needs a postgres user to run PostgreSQL as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, d := range []string{data, sock} {
			if err := os.Chown(d, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			t.Fatalf("running as root needs runuser to start PostgreSQL as postgres: %v", err)
		}
		asUser = []string{runuser, "-u", "postgres", "--"}
	}
	run := func(name string, args ...string) {
		t.Helper()
		argv := append(append(append([]string{}, asUser...), filepath.Join(bin, name)), args...)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
	}
	port := freePort(t)
	run("initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50", port, sock)
	run("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(sock, "log"), "-w", "-t", "60", "start")
	t.Cleanup(func() {
		argv := append(append(append([]string{}, asUser...), filepath.Join(bin, "pg_ctl")), "-D", data, "-m", "immediate", "-w", "stop")
		_ = exec.Command(argv[0], argv[1:]...).Run()
	})
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=10", port)
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port
}
