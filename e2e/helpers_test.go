// Package e2e holds the end-to-end tests: they build ./train once and run
// it the way users do, under a real mpirun with several ranks, on real
// files, against real Slurm, Prometheus and network-namespace hosts. They
// take minutes, so they live apart from the packages' unit tests, and
// `go test -short ./...` skips every one of them (scripts/test.sh runs
// them). TRAIN_E2E_BIN=PATH tests that binary instead of building one
// (an older build, to see a new test fail on the old code).
package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nlpodyssey/safetensors"

	"train/internal/near"
	"train/mpi/mpitest"
)

// bin is the train binary built for this test run.
var bin string

// fashion is where Debian's dataset-fashion-mnist installs the data.
const fashion = "/usr/share/datasets/fashion-mnist"

// rawFashion is the same four IDX files decompressed once for this run.
// TestMain points TRAIN_DATA (the default of --data) at it: every rank of
// every job otherwise inflates 26 MB of gzip first, 0.7 s of a core each
// (an np=4 job of 50 MLP steps took 4.9 s on the .gz files and 1.9 s on
// these). TestAccuracy and the PyTorch checks still read the .gz files.
var rawFashion string

// TestMain runs the tests from the repository root (their paths, such as
// scripts/... and testdata/..., are the root's), with ./train built for
// this run, or the binary TRAIN_E2E_BIN names.
func TestMain(m *testing.M) {
	flag.Parse()
	if err := os.Chdir(".."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if testing.Short() {
		os.Exit(m.Run()) // every test skips, saying why
	}
	dir, err := os.MkdirTemp("", "train-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if rawFashion, err = inflateFashion(filepath.Join(dir, "fashion-mnist")); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v (run scripts/setup.sh)\n", err)
		os.Exit(1)
	}
	os.Setenv("TRAIN_DATA", rawFashion)
	mpitest.FastStart()
	if b := os.Getenv("TRAIN_E2E_BIN"); b != "" {
		if bin, err = filepath.Abs(b); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "e2e: testing %s (TRAIN_E2E_BIN), not a fresh build\n", bin)
	} else {
		bin = filepath.Join(dir, "train")
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// inflateFashion writes the installed Fashion-MNIST's four files into dir
// without their gzip layer and returns dir.
func inflateFashion(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for _, f := range []string{"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"} {
		if err := inflate(filepath.Join(fashion, f+".gz"), filepath.Join(dir, f)); err != nil {
			return "", fmt.Errorf("%s.gz: %w", filepath.Join(fashion, f), err)
		}
	}
	return dir, nil
}

// inflate writes the gzip file src's content to dst.
func inflate(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	zr, err := gzip.NewReader(in)
	if err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, zr); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// e2e starts every test of this package: under -short it skips, since
// each one runs train under mpirun or starts real servers.
func e2e(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: runs train under mpirun; skipped by -short (scripts/test.sh runs it)")
	}
}

// alongside marks a test that may run beside the others so marked, after
// every other test of the package has finished (t.Parallel; go test runs
// -parallel of them at once, GOMAXPROCS unless told: scripts/test.sh says
// 4). Only for tests that time nothing, share no file, port or package
// state with another, and spend much of their time in one process or
// waiting: on Slurm's daemons, PyTorch's reference, the CUDA emulator, or
// on mpirun's teardown of a job that fails on purpose (the bad-input
// tests: mpirun waits odls_base_sigkill_timeout, 1 s, after a rank exits
// non-zero, and TestBadInput used 12% of the machine's 2 cores over its 24
// s). A test that bounds how long a failing job takes to end
// (TestRankFailure, TestPipelineFailure) or that waits on a stall's
// detection (the flight recorder's) stays in sequence; where its own jobs
// mostly wait, they run side by side as its parallel subtests, with
// nothing else of the suite beside them (TestStallAborts,
// TestRankFailure; TestPipelineFailure's four-rank jobs do not). Setting that
// timeout to 0 instead lost the failing rank's message: mpirun killed the
// job before forwarding its stderr.
func alongside(t *testing.T) {
	t.Helper()
	t.Parallel()
}

// result is what one run of train left behind.
type result struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// trainRun runs train on np ranks under mpirun (np = 0: directly, no
// mpirun) with args, failing the test if it does not end within timeout.
func trainRun(t *testing.T, np int, timeout time.Duration, env []string, args ...string) result {
	t.Helper()
	return trainRunMPI(t, np, nil, timeout, env, args...)
}

// trainRunMPI is trainRun with extra mpirun options (a hostfile, a launch
// agent).
func trainRunMPI(t *testing.T, np int, mpirunArgs []string, timeout time.Duration, env []string, args ...string) result {
	t.Helper()
	argv := append([]string{bin}, args...)
	if np > 0 {
		argv = append(append(append([]string{"mpirun"}, mpitest.Args(np)...), mpirunArgs...), argv...)
	}
	return runArgv(t, np, timeout, env, argv)
}

// trainRunNiced is trainRun on np ranks with rank niced run under
// `nice -n 19` (mpirun's MPMD form: the same program and arguments, one
// rank started differently): an uneven rank, slow inside its MPI calls as
// well as between them, as on an overloaded core.
func trainRunNiced(t *testing.T, np, niced int, timeout time.Duration, env []string, args ...string) result {
	t.Helper()
	argv := append([]string{"mpirun"}, mpitest.Args(np)[2:]...) // the options without -np
	sep := ""
	group := func(n int, prefix ...string) {
		if n > 0 {
			if sep != "" {
				argv = append(argv, sep)
			}
			argv = append(append(append(argv, "-np", strconv.Itoa(n)), prefix...), bin)
			argv, sep = append(argv, args...), ":"
		}
	}
	group(niced)
	group(1, "nice", "-n", "19")
	group(np - niced - 1)
	return runArgv(t, np, timeout, env, argv)
}

// runArgv runs argv (train, or mpirun and its arguments) as trainRun does.
func runArgv(t *testing.T, np int, timeout time.Duration, env []string, argv []string) result {
	t.Helper()
	args := argv[1:]
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	// No metrics server unless a test asks: ports stay free, stderr quiet.
	// Flight recorder dumps (on stalls and aborts) go to the test's own
	// directory, not ./flight, unless the test says. OpenMPI's session
	// files go to the job's own directory (mpitest.SessionDir: jobs
	// started at once race on the shared one).
	cmd.Env = append(append(os.Environ(), "TRAIN_METRICS_ADDR=", "TRAIN_FLIGHT_DIR="+t.TempDir(), mpitest.SessionDir(t)), env...)
	cmd.WaitDelay = 5 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	logJob(t, r.took, argv)
	if ctx.Err() != nil {
		t.Fatalf("np=%d %v: still running after %v (hang)\nstdout:\n%s\nstderr:\n%s", np, args, timeout, r.stdout, r.stderr)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("np=%d %v: %v", np, args, err)
	}
	return r
}

// logJob appends a line (the test, seconds, the command) to the file
// TRAIN_E2E_JOBLOG names, if it names one: where the suite's time goes,
// job by job.
func logJob(t *testing.T, took time.Duration, argv []string) {
	path := os.Getenv("TRAIN_E2E_JOBLOG")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Logf("TRAIN_E2E_JOBLOG: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s\t%.2f\t%s\n", t.Name(), took.Seconds(), strings.Join(argv, " "))
}

// mustTrain runs train and fails the test unless it exits 0.
func mustTrain(t *testing.T, np int, args ...string) result {
	t.Helper()
	r := trainRun(t, np, 3*time.Minute, nil, args...)
	if r.code != 0 {
		t.Fatalf("np=%d %v: exit %d\nstdout:\n%s\nstderr:\n%s", np, args, r.code, r.stdout, r.stderr)
	}
	return r
}

// trainLines returns the lines train itself wrote to stderr (not mpirun's
// banners).
func trainLines(stderr string) []string {
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "train: ") {
			lines = append(lines, l)
		}
	}
	return lines
}

// noTrace fails the test if output holds a Go panic trace.
func noTrace(t *testing.T, r result) {
	t.Helper()
	for _, s := range []string{"goroutine ", "panic:", "runtime error", ".go:"} {
		if strings.Contains(r.stderr, s) || strings.Contains(r.stdout, s) {
			t.Errorf("output holds a Go trace (%q):\n%s%s", s, r.stdout, r.stderr)
		}
	}
}

// tensors reads a checkpoint's tensors as name -> float32 values.
func tensors(t *testing.T, path string) map[string][]float32 {
	t.Helper()
	st, _ := safetensorsFile(t, path)
	out := map[string][]float32{}
	for _, nt := range st.Tensors() {
		out[nt.Name] = f32s(nt.TensorView.Data())
	}
	return out
}

// safetensorsFile reads a safetensors file and its metadata.
func safetensorsFile(t *testing.T, path string) (safetensors.SafeTensors, map[string]string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := safetensors.Deserialize(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	_, md, _ := safetensors.ReadMetadata(b)
	return st, md.Metadata()
}

// f32s reads little-endian float32 values (a float32 tensor's data, a
// raw file of them).
func f32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

var finalLine = regexp.MustCompile(`done: step (\d+), parameters identical on all (\d+) rank\(s\) (?:of each of \d+ parts )?\(crc32c ([0-9a-f]{8})`)

// finalCRC checks the run's closing line and returns its step, ranks and
// parameter checksum.
func finalCRC(t *testing.T, r result) (step, ranks int, crc string) {
	t.Helper()
	m := finalLine.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no closing line in stdout:\n%s", r.stdout)
	}
	step, _ = strconv.Atoi(m[1])
	ranks, _ = strconv.Atoi(m[2])
	return step, ranks, m[3]
}

// sameFiles reports whether the files at a and b exist and hold the same
// bytes, failing the test if either cannot be read.
func sameFiles(t *testing.T, a, b string) bool {
	t.Helper()
	x, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(x, y)
}

// resumeIsExact trains 60 steps straight and 30 + a resume to 60 on np
// ranks with args, and reports whether both runs' final checkpoints agree
// byte for byte.
func resumeIsExact(t *testing.T, np int, args ...string) bool {
	t.Helper()
	dir := t.TempDir()
	straight, split := filepath.Join(dir, "straight"), filepath.Join(dir, "split")
	mustTrain(t, np, append(args, "--max-steps", "60", "--checkpoint-dir", straight)...)
	mustTrain(t, np, append(args, "--max-steps", "30", "--checkpoint-dir", split)...)
	mustTrain(t, np, append(args, "--max-steps", "60", "--checkpoint-dir", split, "--resume")...)
	return sameFiles(t, filepath.Join(straight, "step-00000060.safetensors"), filepath.Join(split, "step-00000060.safetensors"))
}

// sameTensors fails the test for every tensor of want that got lacks or
// holds more than tol away (relative to the tensor's largest value, NaN
// and infinities failing: near.Check), naming what differs as what.
func sameTensors(t *testing.T, what string, want, got map[string][]float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d tensors, want %d", what, len(got), len(want))
	}
	for name, w := range want {
		if err := near.Check(w, got[name], tol); err != nil {
			t.Errorf("%s: %s: %v", what, name, err)
		}
	}
}

// trainAt runs train on np ranks with args and --checkpoint-dir dir/name,
// fails the test unless the final replica check covered ranks ranks, and
// returns the run and the tensors of its checkpoint at step.
func trainAt(t *testing.T, np, ranks int, dir, name string, step int, args ...string) (result, map[string][]float32) {
	t.Helper()
	ck := filepath.Join(dir, name)
	r := mustTrain(t, np, append(append([]string{}, args...), "--checkpoint-dir", ck)...)
	if _, got, _ := finalCRC(t, r); got != ranks {
		t.Fatalf("%s: replica check on %d ranks, want %d", name, got, ranks)
	}
	return r, tensors(t, filepath.Join(ck, fmt.Sprintf("step-%08d.safetensors", step)))
}
