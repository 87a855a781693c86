package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"train/flightrec"
	"train/mpi/mpitest"
)

// The flight recorder (issue 19): each fault of TRAIN_FAULT, under a real
// mpirun, leaves a dump from every rank, and train doctor names the rank
// and the call the fault put there.

// doctor runs train doctor on dir, as text and as JSON, and checks that
// every rank of np left a dump for reason.
func doctor(t *testing.T, dir string, np int, reason string) flightrec.Report {
	t.Helper()
	out, err := exec.Command(bin, "doctor", "--json", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("train doctor --json %s: %v\n%s", dir, err, out)
	}
	var rep flightrec.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("train doctor --json: %v\n%s", err, out)
	}
	text, err := exec.Command(bin, "doctor", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("train doctor %s: %v\n%s", dir, err, text)
	}
	t.Logf("train doctor:\n%s", text)
	if len(rep.Dumped) != np || rep.Size != np {
		t.Errorf("dumps from ranks %v of %d, want all %d", rep.Dumped, rep.Size, np)
	}
	for i, r := range rep.Reasons {
		if r != reason {
			t.Errorf("rank %d dumped for %q, want %q", rep.Dumped[i], r, reason)
		}
	}
	return rep
}

// first is the report's first finding of kind, failing the test if none.
func first(t *testing.T, rep flightrec.Report, kind string) flightrec.Finding {
	t.Helper()
	for _, f := range rep.Findings {
		if f.Kind == kind {
			return f
		}
	}
	t.Fatalf("no %q finding in %+v", kind, rep.Findings)
	return flightrec.Finding{}
}

func flightArgs(dir string, more ...string) []string {
	return append([]string{"--model", "mlp", "--log-every", "1", "--flight-dir", dir, "--stall-warn", "2s", "--stall-timeout", "6s"}, more...)
}

// TestStallAborts runs the jobs that abort on --stall-timeout side by
// side, as parallel subtests of one test that runs in sequence with the
// others: flightHang (1), flightSkippedCollective (2), flightSilentWorker
// (5) and stall (ops_test.go). Each job spends 6 of its 8.6 s with its
// ranks asleep, waiting for the timeout; four in a row took 34 s. They
// assert what the watchdog and the doctor say, not how long anything
// took, and nothing else of the suite runs beside them.
// TestFlightSlowRankAndSIGUSR2 (4) stays on its own: it bounds how long
// the others waited for the slow rank.
func TestStallAborts(t *testing.T) {
	e2e(t)
	for _, c := range []struct {
		name string
		run  func(*testing.T)
	}{{"FlightHang", flightHang}, {"FlightSkippedCollective", flightSkippedCollective}, {"FlightSilentWorker", flightSilentWorker}, {"Stall", stall}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t)
		})
	}
}

// 1. A rank that hangs before the gradient allreduce of step 5: the
// watchdog's message says where the dumps are, and the doctor names the
// rank and the allreduce the others wait in.
func flightHang(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	r := trainRun(t, 3, time.Minute, []string{"TRAIN_FAULT=1:5:hang"}, flightArgs(dir, "--max-steps", "50")...)
	if r.code == 0 {
		t.Fatal("exit 0 with a hung rank")
	}
	if want := "flight recorder dumps in " + dir + " (train doctor " + dir + ")"; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
	}
	noTrace(t, r)
	f := first(t, doctor(t, dir, 3, "abort"), "behind")
	if f.Rank != 1 || !slices.Equal(f.Others, []int{0, 2}) || f.Comm != "world" || f.Call.Op != "allreduce" ||
		f.Call.Step != 5 || !strings.HasPrefix(f.Call.Label, "bucket 1 of 1: ") || f.Call.Bytes != 4*203530 {
		t.Errorf("finding %+v, call %+v", f, f.Call)
	}
}

// 2. A rank that skips the gradient allreduce of step 5 goes on to the
// next collective (the log line's sum, with --log-every 1) while the
// others are in the allreduce.
func flightSkippedCollective(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	r := trainRun(t, 3, time.Minute, []string{"TRAIN_FAULT=1:5:skip"}, flightArgs(dir, "--max-steps", "50")...)
	if r.code == 0 {
		t.Fatal("exit 0 with a rank that skipped an allreduce")
	}
	noTrace(t, r)
	f := first(t, doctor(t, dir, 3, "abort"), "mismatch")
	if f.Rank != 1 || !slices.Equal(f.Others, []int{0, 2}) || f.Call.Step != 5 || f.Call.Phase != "the log reduction" || f.Call.Bytes != 24 || f.Call.Dtype != "float64" ||
		f.Their.Bytes != 4*203530 || !strings.HasPrefix(f.Their.Label, "bucket 1 of 1: ") || f.Call.Seq != f.Their.Seq {
		t.Errorf("finding %+v\nrank 1's call %+v\nthe others' %+v", f, f.Call, f.Their)
	}
}

// 3. A rank that reduces half the gradient bucket at step 5, or none of
// it (an empty slice, which returned at once on that rank before and left
// the others waiting for the watchdog). Through the shared segment
// nothing hangs: every rank finds the slices differ at that allreduce,
// which changes nothing and stops the job (an agreed error, one line,
// rank 2's), and every rank dumps. Through the ring over MPI (the 16-bit
// wire keeps it there on one host) rank 2's ring neighbours find it in
// the first message of the step, each from the other side, and abort the
// job: one line or both, as the abort lets them print, and every rank
// dumps.
func TestFlightOtherSize(t *testing.T) {
	e2e(t)
	const full = 203530
	shm := func(n int) []string {
		return []string{fmt.Sprintf("train: rank 2: shared-memory allreduce: rank 2 called it on %d floats at offset 0 of its region, rank 0 on %d at 0: every rank must pass the same slice", n, full)}
	}
	for _, c := range []struct {
		kind, name string
		n          int // rank 2's floats
		args       []string
		lines      []string // the lines the job may print, at least one
		reason     string   // the ranks' dumps'
	}{
		{"size", "size", full / 2, nil, shm(full / 2), "error"},
		{"empty", "empty", 0, nil, shm(0), "error"},
		{"empty", "empty ring", 0, []string{"--compress", "bf16"}, []string{
			fmt.Sprintf("train: rank 0: ring reduce-scatter of %d floats: rank 2's message holds 0 floats where this rank expected 65536, from a slice of another length: every rank must pass the same slice", full),
			"train: rank 2: ring reduce-scatter of 0 floats: rank 1's message holds 65536 floats where this rank expected 0, from a slice of another length: every rank must pass the same slice",
		}, "abort"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			r := trainRun(t, 3, time.Minute, []string{"TRAIN_FAULT=2:5:" + c.kind}, flightArgs(dir, append([]string{"--max-steps", "8"}, c.args...)...)...)
			lines := trainLines(r.stderr)
			ok := r.code != 0 && len(lines) >= 1 && len(lines) <= len(c.lines)
			for _, l := range lines {
				ok = ok && slices.Contains(c.lines, l)
			}
			if !ok {
				t.Fatalf("exit %d, want 1 to %d of the lines %q:\n%s", r.code, len(c.lines), c.lines, r.stderr)
			}
			noTrace(t, r)
			f := first(t, doctor(t, dir, 3, c.reason), "mismatch")
			if f.Rank != 2 || !slices.Equal(f.Others, []int{0, 1}) || f.Call.Step != 5 || f.Call.Bytes != int64(4*c.n) || f.Their.Bytes != 4*full ||
				!strings.Contains(f.Text, "rank 2 called it with a different size") {
				t.Errorf("finding %+v", f)
			}
		})
	}
}

// 4 and SIGUSR2. A rank that sleeps 0.7 s at every step from step 2:
// SIGUSR2 to mpirun mid-run makes every rank dump, training goes on, and
// the job ends with the parameters of an undisturbed run (no fault, no
// signal). The doctor names the slow rank.
func TestFlightSlowRankAndSIGUSR2(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	args := flightArgs(dir, "--max-steps", "14")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := mpitest.Command(ctx, 3, bin, args...)
	cmd.Env = append(os.Environ(), "TRAIN_METRICS_ADDR=", "TRAIN_FAULT=2:2:slow:700ms")
	var out syncBuffer
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Signal once step 9 is logged: well into the slow steps, before the end.
	for !strings.Contains(out.String(), " step 9 ") && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGUSR2)
	err := cmd.Wait()
	r := result{stdout: out.String(), stderr: errb.String()}
	if err != nil {
		t.Fatalf("after SIGUSR2: %v\n%s\n%s", err, r.stdout, r.stderr)
	}
	step, _, crc := finalCRC(t, r)
	plain := mustTrain(t, 3, "--model", "mlp", "--log-every", "1", "--max-steps", "14")
	if step2, _, crc2 := finalCRC(t, plain); step != 14 || step2 != 14 || crc != crc2 {
		t.Errorf("with the slow rank and SIGUSR2: step %d crc32c %s; undisturbed: step %d crc32c %s", step, crc, step2, crc2)
	}
	f := first(t, doctor(t, dir, 3, "SIGUSR2"), "slow")
	if f.Rank != 2 || !slices.Equal(f.Others, []int{0, 1}) || !(f.Waited >= 0.5 && f.Waited <= 1.5) {
		t.Errorf("finding %+v", f)
	}
}

// 5. A parameter-server worker that stops talking to its server: the
// server waits for its message, the other workers wait for the server.
func flightSilentWorker(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	r := trainRun(t, 4, time.Minute, []string{"TRAIN_FAULT=1:5:hang"},
		flightArgs(dir, "--max-steps", "50", "--strategy", "ps-sync", "--servers", "1")...)
	if r.code == 0 {
		t.Fatal("exit 0 with a hung worker")
	}
	noTrace(t, r)
	rep := doctor(t, dir, 4, "abort")
	f := rep.Findings[0]
	if f.Kind != "no-message" || f.Rank != 1 || !slices.Equal(f.Others, []int{3}) || f.Comm != "world" || f.Call.Op != "recv" {
		t.Errorf("the first finding should be worker 1 silent towards server 3: %+v", f)
	}
	for _, f := range rep.Findings[1:] {
		if f.Kind != "waits-on" || f.Rank != 3 || !strings.HasSuffix(f.Text, "which waits in turn for rank 1") {
			t.Errorf("a later finding: %+v", f)
		}
	}
}

// A NaN stop dumps every rank's recorder, by default into flight/ beside
// the checkpoints, and changes nothing else there.
func TestFlightNaNStopDefaultDir(t *testing.T) {
	e2e(t)
	ck := t.TempDir()
	r := trainRun(t, 2, time.Minute, []string{"TRAIN_FAULT=1:7:nan", "TRAIN_FLIGHT_DIR="},
		"--model", "mlp", "--max-steps", "20", "--checkpoint-every", "5", "--checkpoint-dir", ck, "--log-every", "5")
	if r.code == 0 || !strings.Contains(r.stderr, "the gradients are not finite") {
		t.Fatalf("exit %d:\n%s", r.code, r.stderr)
	}
	rep := doctor(t, filepath.Join(ck, "flight"), 2, "nan")
	if len(rep.Findings) != 0 {
		t.Errorf("an agreed stop, nothing stuck: findings %+v", rep.Findings)
	}
	ents, _ := os.ReadDir(ck)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"flight", "step-00000005.safetensors"}) {
		t.Errorf("checkpoint directory holds %v", names)
	}
}

// syncBuffer is a bytes.Buffer that one goroutine writes while another reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
