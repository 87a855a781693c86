// Package mpitest runs tests under a real mpirun.
//
// A test calls Launch: outside mpirun it re-runs its own test binary, that
// one test only, under `mpirun -np N`, and fails with the ranks' output if
// the job fails or if not every rank reports the test passed (a -run
// pattern that matched nothing exits 0 too); inside (in each rank) Launch
// returns true and the test body runs with a real MPI world. Under
// `go test -short` it skips: -short is the unit tests without mpirun. Command builds the mpirun command line
// that tests and scripts share: --oversubscribe (the machines have fewer
// cores than the tests have ranks), --bind-to none, and
// --allow-run-as-root when running as root.
package mpitest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"train/mpi"
)

// childEnv marks a process started by Launch.
const childEnv = "TRAIN_MPITEST_CHILD"

// Args returns the mpirun arguments for np ranks, before the program.
func Args(np int) []string {
	a := []string{"-np", fmt.Sprint(np), "--oversubscribe", "--bind-to", "none"}
	if os.Geteuid() == 0 {
		a = append(a, "--allow-run-as-root")
	}
	return a
}

// Command returns an mpirun command running prog with args on np ranks.
func Command(ctx context.Context, np int, prog string, args ...string) *exec.Cmd {
	a := append(Args(np), prog)
	return exec.CommandContext(ctx, "mpirun", append(a, args...)...)
}

// FastStart names OpenMPI's ob1 point-to-point layer in this process's
// environment, and so in every mpirun it starts, unless OMPI_MCA_pml is
// set already. Debian 12's OpenMPI selects ob1 anyway on a machine
// without Omni-Path (its /etc/openmpi/openmpi-mca-params.conf excludes
// UCX and OFI), but each rank first opens the cm layer and, for it, the
// PSM and PSM2 transports and their libraries: 0.24 s of a 0.65 s
// two-rank MPI_Init-and-Finalize here, on each of the suite's ~400 jobs.
// Naming ob1 skips only that probe; the ranks talk over the same
// transports (vader within a host, tcp between hosts). The README's own
// job (e2e's TestAccuracy, and scripts/setup.sh) starts the default way.
func FastStart() {
	if _, set := os.LookupEnv("OMPI_MCA_pml"); !set {
		os.Setenv("OMPI_MCA_pml", "ob1")
	}
}

// SessionDir makes a directory of one job's own for OpenMPI's session
// files and returns the environment entry that points the job's mpirun
// (or a singleton rank's orted) at it; the directory goes when the test
// ends. Jobs started at once otherwise share /tmp/ompi.HOST.UID, which
// each makes if it is missing and removes when it ends empty: a job whose
// mkdir lost to another's, and whose check that the directory exists
// came after a third job's rmdir, fails in orte_init ("A call to mkdir
// was unable to create the desired directory: /tmp/ompi.vm.0 Error: File
// exists"; opal_os_dirpath_create, OpenMPI issue 8510). It did so once,
// in one of TestStallAborts' four jobs started together in a fresh root
// (2026-12-02). A short path (os.MkdirTemp, not the test's TempDir named
// after it): OpenMPI makes sockets and files below it.
func SessionDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ompi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return "OMPI_MCA_orte_tmpdir_base=" + dir
}

// World starts MPI in a rank that Launch started, and ends it when the
// test ends: MPI_Finalize after a pass, MPI_Abort after a failure. A rank
// whose test failed would otherwise wait in MPI_Finalize for ranks that
// wait in a collective for it, and the job would hang until Launch's
// timeout; the abort ends every rank at once, and Launch shows the failed
// rank's message (-test.v streams it before the abort).
func World(t *testing.T) *mpi.World {
	t.Helper()
	w, err := mpi.Init()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			fmt.Fprintf(os.Stderr, "mpitest: rank %d failed %s: aborting the job\n", w.Rank(), t.Name())
			w.Abort(1)
		}
		if err := w.Finalize(); err != nil {
			t.Error(err)
		}
	})
	return w
}

// InRank reports whether this process is a rank started by Launch.
func InRank() bool { return os.Getenv(childEnv) != "" }

// Launch runs the calling test under mpirun on np ranks. In the parent it
// returns false after the job (the caller returns too); in a rank it
// returns true and the caller runs the test body. env entries are added to
// the ranks' environment.
func Launch(t *testing.T, np int, timeout time.Duration, env ...string) bool {
	t.Helper()
	if InRank() {
		return true
	}
	if testing.Short() {
		t.Skipf("runs under mpirun (np=%d); skipped by -short (scripts/test.sh runs it)", np)
	}
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Fatalf("mpirun not found: run scripts/setup.sh first (%v)", err)
	}
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	start := time.Now()
	out, timedOut, err := job(np, timeout, strings.Join(parts, "/"), append([]string{SessionDir(t)}, env...)...)
	if timedOut {
		t.Fatalf("np=%d: mpirun did not finish within %v:\n%s", np, timeout, out)
	}
	if err != nil {
		t.Fatalf("np=%d: %v:\n%s", np, err, out)
	}
	passed, skipped, why := outcomes(string(out), t.Name())
	switch {
	case passed == np:
		t.Logf("np=%d: passed on every rank in %v", np, time.Since(start).Round(time.Millisecond))
	case skipped == np:
		t.Skipf("np=%d: skipped on every rank: %s", np, why)
	default:
		t.Fatalf("np=%d: %d rank(s) reported --- PASS: %s and %d --- SKIP, want %d passes (did the test run in every rank?):\n%s",
			np, passed, t.Name(), skipped, np, out)
	}
	return false
}

// job runs the tests of this binary that run matches (a -test.run
// pattern) on np ranks under mpirun, each rank marked as Launch's and
// given env, and returns the ranks' output together, whether timeout
// ended the job, and how it exited.
func job(np int, timeout time.Duration, run string, env ...string) (out []byte, timedOut bool, err error) {
	FastStart()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := Command(ctx, np, os.Args[0], "-test.run", run, "-test.v", "-test.count=1")
	cmd.Env = append(append(os.Environ(), childEnv+"=1"), env...)
	cmd.WaitDelay = 5 * time.Second
	out, err = cmd.CombinedOutput()
	return out, ctx.Err() != nil, err
}

// outcomes counts the ranks' "--- PASS: name (" and "--- SKIP: name ("
// lines in the verbose output of a job, and returns the first skip's
// reason (the line after it).
func outcomes(out, name string) (passed, skipped int, why string) {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "--- PASS: "+name+" ("):
			passed++
		case strings.HasPrefix(l, "--- SKIP: "+name+" ("):
			skipped++
			if why == "" && i+1 < len(lines) {
				why = strings.TrimSpace(lines[i+1])
			}
		}
	}
	return passed, skipped, why
}
