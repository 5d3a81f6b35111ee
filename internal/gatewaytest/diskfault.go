package gatewaytest

import (
	_ "embed"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// faultfsSource is a small shared library preloaded into the gateway to
// make its database's disk fail on command (see testdata/faultfs.c).
//
//go:embed testdata/faultfs.c
var faultfsSource []byte

var faultfs struct {
	once sync.Once
	path string
	err  error
}

// faultfsLibrary builds the preload library once per test process, with
// the C compiler cgo uses (the gateway's SQLite needs one anyway).
func faultfsLibrary(t testing.TB) string {
	t.Helper()
	faultfs.once.Do(func() {
		dir, err := os.MkdirTemp("", "faultfs")
		if err != nil {
			faultfs.err = err
			return
		}
		src := filepath.Join(dir, "faultfs.c")
		if faultfs.err = os.WriteFile(src, faultfsSource, 0o644); faultfs.err != nil {
			return
		}
		cc := os.Getenv("CC")
		if cc == "" {
			cc = "gcc"
		}
		faultfs.path = filepath.Join(dir, "faultfs.so")
		out, err := exec.Command(cc, "-shared", "-fPIC", "-O2", "-o", faultfs.path, src, "-ldl").CombinedOutput()
		if err != nil {
			faultfs.err = &buildError{err: err, out: string(out)}
		}
	})
	if faultfs.err != nil {
		t.Fatalf("building the disk fault library: %v", faultfs.err)
	}
	return faultfs.path
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

// DiskFault makes the disk under a gateway's database fail on command.
type DiskFault struct {
	t       testing.TB
	control string
}

// Fail makes every write and sync of the database's files fail with errno
// ("ENOSPC": the disk is full, "EIO": an I/O error, "EROFS": a read-only
// file system) until Heal. Files outside the database's directory (a usage
// journal on another disk) are not affected.
func (d *DiskFault) Fail(errno string) {
	d.t.Helper()
	if err := os.WriteFile(d.control+".tmp", []byte(errno), 0o644); err != nil {
		d.t.Fatal(err)
	}
	if err := os.Rename(d.control+".tmp", d.control); err != nil {
		d.t.Fatal(err)
	}
}

// Heal lets the database's disk take writes again.
func (d *DiskFault) Heal() {
	d.t.Helper()
	if err := os.Remove(d.control); err != nil && !os.IsNotExist(err) {
		d.t.Fatal(err)
	}
}

// StartWithDiskFaults starts a gateway as Start does, its database in a
// directory of its own whose disk the returned DiskFault can fail. The
// database is {{DB}} as usual.
func StartWithDiskFaults(t testing.TB, caddyfile string, vars Vars) (*Gateway, *DiskFault) {
	t.Helper()
	SkipOnPostgres(t, "the faults are injected below SQLite, into libc's writes to its file; PostgreSQL's files are the server's")
	lib := faultfsLibrary(t)
	control := filepath.Join(t.TempDir(), "disk-fault")
	dbDir := filepath.Join(t.TempDir(), "disk")
	if err := os.MkdirAll(dbDir, 0o755); err != nil {
		t.Fatal(err)
	}
	g := start(t, caddyfile, vars, filepath.Join(dbDir, "gateway.db"),
		[]string{"LD_PRELOAD=" + lib, "FAULTFS_CONTROL=" + control, "FAULTFS_PREFIX=" + dbDir + "/"})
	return g, &DiskFault{t: t, control: control}
}
