package e2e

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"train/mpi/mpitest"
)

// liveJob is a training job started in the background by a test, with
// its output streamed so the test can wait for a line.
type liveJob struct {
	cmd    *exec.Cmd
	lines  chan string
	out    *bytes.Buffer
	done   chan error
	cancel context.CancelFunc
}

func startJob(t *testing.T, np int, env []string, args ...string) *liveJob {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	cmd := mpitest.Command(ctx, np, bin, args...)
	cmd.Env = append(append(os.Environ(), "TRAIN_METRICS_ADDR="), env...)
	cmd.WaitDelay = 5 * time.Second
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	j := &liveJob{cmd: cmd, lines: make(chan string, 1000), out: &bytes.Buffer{}, done: make(chan error, 1), cancel: cancel}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			j.out.WriteString(sc.Text() + "\n")
			select {
			case j.lines <- sc.Text():
			default:
			}
		}
		close(j.lines)
	}()
	go func() { err := cmd.Wait(); pw.Close(); j.done <- err }()
	t.Cleanup(cancel)
	return j
}

// waitLine waits for an output line matching re.
func (j *liveJob) waitLine(t *testing.T, re string, within time.Duration) []string {
	t.Helper()
	r := regexp.MustCompile(re)
	deadline := time.After(within)
	for {
		select {
		case l, ok := <-j.lines:
			if !ok {
				t.Fatalf("job ended before a line matching %q:\n%s", re, j.out)
			}
			if m := r.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-deadline:
			t.Fatalf("no line matching %q within %v:\n%s", re, within, j.out)
		}
	}
}

// wait waits for the job's end and returns its exit code and duration
// from now.
func (j *liveJob) wait(t *testing.T, within time.Duration) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	select {
	case err := <-j.done:
		for range j.lines {
		}
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return code, time.Since(start)
	case <-time.After(within):
		j.cancel()
		t.Fatalf("job still running after %v:\n%s", within, j.out)
	}
	return 0, 0
}

// ranks returns the pids of the job's train processes (mpirun's children).
func (j *liveJob) ranks(t *testing.T) []int {
	t.Helper()
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(stat)
		close := strings.LastIndexByte(s, ')')
		if close < 0 || !strings.Contains(s[:close], "(train") {
			continue
		}
		f := strings.Fields(s[close+1:])
		if ppid, _ := strconv.Atoi(f[1]); ppid == j.cmd.Process.Pid {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		t.Fatal("no rank processes found under this job's mpirun")
	}
	return pids
}

// TestSignalStop: SIGTERM to one rank stops every rank at the same step
// boundary with a checkpoint and exit 0, also when it comes twice (as under
// Slurm, from slurmd and again from srun); --resume continues from it.
func TestSignalStop(t *testing.T) {
	e2e(t)
	ck := t.TempDir()
	j := startJob(t, 2, nil, "--batch-size", "8", "--epochs", "20", "--log-every", "50", "--checkpoint-dir", ck)
	j.waitLine(t, `step 100 `, time.Minute)
	pids := j.ranks(t)
	syscall.Kill(pids[len(pids)-1], syscall.SIGTERM)
	syscall.Kill(pids[len(pids)-1], syscall.SIGTERM)
	code, took := j.wait(t, 30*time.Second)
	if code != 0 {
		t.Fatalf("exit %d after SIGTERM:\n%s", code, j.out)
	}
	m := regexp.MustCompile(`stopped by SIGTERM at step (\d+): checkpoint written`).FindStringSubmatch(j.out.String())
	if m == nil {
		t.Fatalf("no stop line:\n%s", j.out)
	}
	if _, err := os.Stat(filepath.Join(ck, "step-"+pad8(m[1])+".safetensors")); err != nil {
		t.Errorf("no checkpoint at the stop step: %v", err)
	}
	t.Logf("stopped at step %s, %v after the signal", m[1], took.Round(time.Millisecond))
	stop, _ := strconv.Atoi(m[1])
	r := mustTrain(t, 2, "--batch-size", "8", "--epochs", "20", "--log-every", "50", "--checkpoint-dir", ck, "--resume", "--max-steps", strconv.Itoa(stop+10))
	if !strings.Contains(r.stdout, "(step "+m[1]+",") {
		t.Errorf("resume did not start at step %s:\n%s", m[1], r.stdout)
	}
}

func pad8(s string) string { return strings.Repeat("0", 8-len(s)) + s }

// TestKillAndResume: SIGKILL of rank 1 at a random step ends the job
// within 10 s; a rerun with --resume (from the last periodic checkpoint)
// ends with the same bytes as a run that was never interrupted.
func TestKillAndResume(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	straight, crashed := filepath.Join(dir, "straight"), filepath.Join(dir, "crashed")
	common := []string{"--batch-size", "32", "--epochs", "1", "--max-steps", "120", "--checkpoint-every", "25"}
	mustTrain(t, 2, append(common, "--log-every", "20", "--checkpoint-dir", straight)...)
	step := 30 + rand.IntN(80)
	j := startJob(t, 2, nil, append(common, "--log-every", "1", "--checkpoint-dir", crashed)...)
	j.waitLine(t, `step `+strconv.Itoa(step)+` `, 2*time.Minute)
	pids := j.ranks(t)
	syscall.Kill(pids[len(pids)-1], syscall.SIGKILL)
	code, took := j.wait(t, time.Minute)
	if code == 0 {
		t.Fatalf("a killed rank, yet exit 0:\n%s", j.out)
	}
	t.Logf("a rank SIGKILLed after step %d: the job ended %v later", step, took.Round(time.Millisecond))
	if took > 10*time.Second {
		t.Errorf("the job took %v to end after the kill", took)
	}
	res := mustTrain(t, 2, append(common, "--checkpoint-dir", crashed, "--resume")...)
	if !strings.Contains(res.stdout, "resume: ") {
		t.Errorf("did not resume:\n%s", res.stdout)
	}
	a, _ := os.ReadFile(filepath.Join(straight, "step-00000120.safetensors"))
	b, _ := os.ReadFile(filepath.Join(crashed, "step-00000120.safetensors"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Error("the resumed run's final checkpoint differs from the uninterrupted run's")
	}
}

// TestKillDuringCheckpoint: rank 0 killed half way through writing a
// checkpoint leaves the previous one valid; the torn temporary file is
// ignored and --resume starts from the previous checkpoint.
func TestKillDuringCheckpoint(t *testing.T) {
	e2e(t)
	ck := t.TempDir()
	r := trainRun(t, 2, time.Minute, []string{"TRAIN_FAULT=0:20:kill-in-checkpoint"},
		"--max-steps", "40", "--checkpoint-every", "10", "--checkpoint-dir", ck, "--log-every", "10")
	if r.code == 0 {
		t.Fatal("exit 0 although rank 0 was killed")
	}
	ents, _ := os.ReadDir(ck)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slicesContains(names, "step-00000010.safetensors") || slicesContains(names, "step-00000020.safetensors") {
		t.Fatalf("checkpoint dir holds %v", names)
	}
	torn := false
	for _, n := range names {
		torn = torn || strings.HasPrefix(n, ".step-00000020.safetensors.tmp-")
	}
	if !torn {
		t.Errorf("no torn temporary file: was the kill half way? %v", names)
	}
	res := mustTrain(t, 2, "--max-steps", "30", "--checkpoint-dir", ck, "--resume", "--log-every", "10")
	if !strings.Contains(res.stdout, "(step 10, epoch 1)") {
		t.Errorf("did not resume from step 10:\n%s", res.stdout)
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// stall: a rank that hangs is named, with the step, by rank 0's
// watchdog, and the job aborts after --stall-timeout (run by
// TestStallAborts, flight_test.go).
func stall(t *testing.T) {
	e2e(t)
	r := trainRun(t, 3, time.Minute, []string{"TRAIN_FAULT=1:5:hang"},
		"--max-steps", "50", "--log-every", "1", "--stall-warn", "2s", "--stall-timeout", "6s")
	if r.code == 0 {
		t.Fatal("exit 0 with a hung rank")
	}
	for _, want := range []string{"train: rank 0: stall at step 5: ranks [0 2] have waited in the gradient allreduce",
		"not arrived: rank 1 (at step 5, computing", "aborting (--stall-timeout 6s)"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	noTrace(t, r)
}

// TestNonFinite: NaN gradients on one rank stop every rank with one line;
// the last good checkpoint stays and nothing later is written.
func TestNonFinite(t *testing.T) {
	e2e(t)
	ck := t.TempDir()
	r := trainRun(t, 2, time.Minute, []string{"TRAIN_FAULT=1:12:nan"},
		"--max-steps", "40", "--checkpoint-every", "5", "--checkpoint-dir", ck, "--log-every", "5")
	lines := trainLines(r.stderr)
	if r.code == 0 || len(lines) != 1 || !strings.Contains(lines[0], "step 12: the gradients are not finite") ||
		!strings.Contains(lines[0], "the last checkpoint, step 10, is kept") {
		t.Fatalf("exit %d, lines %q", r.code, lines)
	}
	ents, _ := os.ReadDir(ck)
	if len(ents) != 2 || ents[1].Name() != "step-00000010.safetensors" {
		t.Errorf("checkpoints %v", ents)
	}
	noTrace(t, r)
}

// TestCheckpointFallback: a corrupt newest checkpoint makes --resume warn,
// naming it, and fall back to the previous valid one; with none valid,
// --resume is a one-line error; the files are never changed.
func TestCheckpointFallback(t *testing.T) {
	e2e(t)
	ck := t.TempDir()
	mustTrain(t, 2, "--max-steps", "20", "--checkpoint-every", "10", "--checkpoint-dir", ck, "--log-every", "10")
	flip := func(name string) {
		p := filepath.Join(ck, name)
		b, _ := os.ReadFile(p)
		b[len(b)-100] ^= 1
		os.WriteFile(p, b, 0o644)
	}
	flip("step-00000020.safetensors")
	before := dirBytes(t, ck)
	r := trainRun(t, 2, time.Minute, nil, "--max-steps", "15", "--checkpoint-dir", ck, "--resume", "--log-every", "5")
	if r.code != 0 || !strings.Contains(r.stderr, "train: warning: checkpoint "+filepath.Join(ck, "step-00000020.safetensors")+": checksum mismatch") ||
		!strings.Contains(r.stdout, "(step 10, epoch 1)") {
		t.Fatalf("fallback: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for name, b := range before {
		if now, _ := os.ReadFile(filepath.Join(ck, name)); !bytes.Equal(now, b) && name != "step-00000015.safetensors" {
			t.Errorf("%s changed", name)
		}
	}
	os.Remove(filepath.Join(ck, "step-00000015.safetensors"))
	flip("step-00000010.safetensors")
	r = trainRun(t, 2, time.Minute, nil, "--max-steps", "15", "--checkpoint-dir", ck, "--resume")
	lines := trainLines(r.stderr)
	if r.code == 0 || !strings.Contains(r.stderr, "none of the 2 checkpoints") {
		t.Errorf("all corrupt: exit %d %q", r.code, lines)
	}
	noTrace(t, r)
}
