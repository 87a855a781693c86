package mpitest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestOutcomes: a rank counts as passed only on its own "--- PASS:" line
// for exactly this test (not a test whose name it prefixes, not the
// parent of a subtest); skips are counted with their reason.
func TestOutcomes(t *testing.T) {
	out := `=== RUN   TestRing
=== RUN   TestRing/np=2
--- PASS: TestRing (0.10s)
    --- PASS: TestRing/np=2 (0.10s)
--- PASS: TestRingCompressed (0.01s)
=== RUN   TestRing/np=2
    --- SKIP: TestRing/np=2 (0.00s)
        ring_test.go:12: no GPU here
PASS
testing: warning: no tests to run
PASS
`
	for _, tc := range []struct {
		name          string
		passed, skips int
		why           string
	}{
		{"TestRing", 1, 0, ""},
		{"TestRing/np=2", 1, 1, "ring_test.go:12: no GPU here"},
		{"TestRingCompressed", 1, 0, ""},
		{"TestRin", 0, 0, ""},
		{"TestAbsent", 0, 0, ""},
	} {
		p, s, why := outcomes(out, tc.name)
		if p != tc.passed || s != tc.skips || why != tc.why {
			t.Errorf("%s: %d passed, %d skipped (%q); want %d, %d (%q)", tc.name, p, s, why, tc.passed, tc.skips, tc.why)
		}
	}
}

// TestWorldAbortsOnFailure: a rank whose test fails ends the job at once
// (World's cleanup calls MPI_Abort) instead of leaving the other ranks in
// a collective until the job's timeout. The job runs this test on 3
// ranks: rank 1 fails before a barrier that ranks 0 and 2 wait in. With
// MPI_Finalize in its place the job hangs, and the 30 s deadline fails it.
func TestWorldAbortsOnFailure(t *testing.T) {
	if InRank() {
		w := World(t)
		if w.Rank() == 1 {
			t.Fatal("rank 1 fails on purpose")
		}
		if err := w.Barrier(); err != nil {
			t.Error(err)
		}
		return
	}
	if testing.Short() {
		t.Skip("runs under mpirun (np=3); skipped by -short (scripts/test.sh runs it)")
	}
	start := time.Now()
	out, timedOut, err := job(3, 30*time.Second, "^TestWorldAbortsOnFailure$")
	if timedOut {
		t.Fatalf("the job still ran after 30 s: the failed rank did not end it:\n%s", out)
	}
	if err == nil {
		t.Fatalf("the job exited 0 although rank 1 failed:\n%s", out)
	}
	for _, want := range []string{"rank 1 fails on purpose", "mpitest: rank 1 failed TestWorldAbortsOnFailure: aborting the job"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the job's output lacks %q:\n%s", want, out)
		}
	}
	t.Logf("the job ended in %v: %v", time.Since(start).Round(time.Millisecond), err)
}

// TestSessionDir: SessionDir's directory exists while the test runs, has
// a short path, is gone when the test ends, and is where a real mpirun
// puts its session files: were the MCA parameter renamed (OpenMPI 5
// reads prte_tmpdir_base), the jobs would share /tmp again and this
// would fail.
func TestSessionDir(t *testing.T) {
	var dir string
	t.Run("job", func(t *testing.T) {
		entry := SessionDir(t)
		name, value, ok := strings.Cut(entry, "=")
		if !ok || name != "OMPI_MCA_orte_tmpdir_base" {
			t.Fatalf("SessionDir = %q, want OMPI_MCA_orte_tmpdir_base=DIR", entry)
		}
		dir = value
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			t.Fatalf("%s: not a directory (%v)", dir, err)
		}
		if len(dir) > 40 {
			t.Errorf("%s: %d characters; OpenMPI makes sockets below it, keep it short", dir, len(dir))
		}
		if testing.Short() {
			t.Skip("the rest starts mpirun; skipped by -short (scripts/test.sh runs it)")
		}
		if _, err := exec.LookPath("mpirun"); err != nil {
			t.Fatalf("mpirun not found: run scripts/setup.sh first (%v)", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// Each rank lists the directory while the job runs: OpenMPI's
		// session directory (ompi.HOST.UID) must be there.
		cmd := Command(ctx, 2, "sh", "-c", "ls "+dir)
		cmd.Env = append(os.Environ(), entry)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("mpirun: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "ompi.") {
			t.Errorf("the job's ranks saw no ompi.* session directory in %s:\n%s", dir, out)
		}
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still there after the test (%v)", dir, err)
	}
}
