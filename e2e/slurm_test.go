package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// slurm is a private single-node Slurm cluster started by
// scripts/slurm/local-cluster.sh for one test and stopped (by pid) after it.
type slurm struct {
	env []string // SLURM_CONF and the rest of the environment
}

func startSlurm(t *testing.T) *slurm {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the Slurm test starts slurmd, which must run as root")
	}
	base := t.TempDir()
	// munged wants its socket reachable by all; TempDir's parent is 0700.
	os.Chmod(filepath.Dir(base), 0o755)
	ports := freePorts(t, 2)
	env := append(os.Environ(), fmt.Sprintf("SLURMCTLD_PORT=%d", ports[0]), fmt.Sprintf("SLURMD_PORT=%d", ports[1]))
	t.Cleanup(func() {
		out, err := exec.Command("scripts/slurm/local-cluster.sh", "stop", base).CombinedOutput()
		if err != nil {
			t.Errorf("stopping Slurm: %v\n%s", err, out)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "scripts/slurm/local-cluster.sh", "start", base)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		logs, _ := exec.Command("sh", "-c", "tail -n 20 "+base+"/log/*").CombinedOutput()
		t.Fatalf("starting Slurm: %v\n%s\n%s", err, out, logs)
	}
	return &slurm{env: append(env, "SLURM_CONF="+filepath.Join(base, "slurm.conf"))}
}

// run runs a Slurm client command, failing the test on error or after a
// minute.
func (s *slurm) run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	out, err := s.cmd(dir, time.Minute, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// cmd is a Slurm client command in dir, killed after timeout (coreutils'
// timeout: a client waiting on a dead controller never hangs the test).
func (s *slurm) cmd(dir string, timeout time.Duration, name string, args ...string) *exec.Cmd {
	cmd := exec.Command("timeout", append([]string{"-s", "KILL", fmt.Sprint(int(timeout.Seconds())), name}, args...)...)
	cmd.Dir, cmd.Env = dir, s.env
	return cmd
}

// state is a job's state and restart count ("" when Slurm no longer knows
// the job).
func (s *slurm) state(dir, id string) (state, restarts string) {
	out, _ := s.cmd(dir, 20*time.Second, "scontrol", "show", "job", id, "-o").Output()
	f := func(key string) string {
		if m := regexp.MustCompile(key + `=(\S+)`).FindSubmatch(out); m != nil {
			return string(m[1])
		}
		return ""
	}
	return f("JobState"), f("Restarts")
}

// waitState polls until the job reaches one of states, or fails the test.
func (s *slurm) waitState(t *testing.T, dir, id string, within time.Duration, states ...string) string {
	t.Helper()
	deadline := time.Now().Add(within)
	last := ""
	for time.Now().Before(deadline) {
		st, _ := s.state(dir, id)
		for _, want := range states {
			if st == want {
				return st
			}
		}
		last = st
		time.Sleep(200 * time.Millisecond)
	}
	out, _ := os.ReadFile(filepath.Join(dir, "out-"+id+".txt"))
	t.Fatalf("job %s: state %q after %v, want one of %v\n%s", id, last, within, states, out)
	return ""
}

// TestSlurmBatch runs scripts/slurm/train.sbatch on a real single-node
// Slurm with 2 tasks launched by srun --mpi=pmix: a job runs to the end; a
// second job with the same settings is stopped twice, once as at its time
// limit (SIGUSR1 to the batch script, which forwards it and requeues the
// job itself) and once by `scontrol requeue` (SIGTERM to every task), and
// each time continues from its checkpoint to the same final parameters.
func TestSlurmBatch(t *testing.T) {
	e2e(t)
	alongside(t)
	t0 := time.Now()
	s := startSlurm(t)
	t.Logf("%.1fs: Slurm is up", time.Since(t0).Seconds())
	dir := t.TempDir()
	script, _ := filepath.Abs("scripts/slurm/train.sbatch")
	s.env = append(s.env, "TRAIN_BIN="+bin, "TRAIN_METRICS_ADDR=")
	// 400 steps of about 10 ms, a checkpoint every 40: each interrupt
	// comes some steps after a checkpoint, hundreds before the end.
	args := []string{"--hidden", "1024,1024", "--batch-size", "16", "--max-steps", "400", "--checkpoint-every", "40", "--log-every", "200", "--log-file", "run.jsonl"}
	done := regexp.MustCompile(`done: step 400, parameters identical on all 2 rank\(s\) \(crc32c ([0-9a-f]+)\)`)

	// 1. Uninterrupted: sbatch --wait returns the job's exit code.
	out, err := s.cmd(dir, 5*time.Minute, "sbatch", append([]string{"--wait", "-o", "out-%j.txt", script}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch --wait: %v\n%s", err, out)
	}
	id := regexp.MustCompile(`Submitted batch job (\d+)`).FindSubmatch(out)
	if id == nil {
		t.Fatalf("no job id from sbatch:\n%s", out)
	}
	log1, _ := os.ReadFile(filepath.Join(dir, "out-"+string(id[1])+".txt"))
	m := done.FindSubmatch(log1)
	if m == nil || !strings.Contains(string(log1), "train: slurm job "+string(id[1])+", restart 0") {
		t.Fatalf("job %s did not finish as expected:\n%s", id[1], log1)
	}
	want := string(m[1])
	t.Logf("%.1fs: job %s done", time.Since(t0).Seconds(), id[1])
	if _, err := os.Stat(filepath.Join(dir, "checkpoints", string(id[1]), "step-00000400.safetensors")); err != nil {
		t.Errorf("no final checkpoint under checkpoints/<job id>: %v", err)
	}

	// 2. Interrupted twice.
	job := s.run(t, dir, "sbatch", append([]string{"--parsable", "-o", "out-%j.txt", script}, args...)...)
	ck := filepath.Join(dir, "checkpoints", job)
	outFile := filepath.Join(dir, "out-"+job+".txt")
	interrupt := func(restart string, how func()) {
		t.Helper()
		// Wait for a checkpoint of this run (the step line after it shows
		// training is under way past it), then interrupt.
		deadline := time.Now().Add(2 * time.Minute)
		for {
			b, _ := os.ReadFile(outFile)
			if regexp.MustCompile(`(?s)slurm job ` + job + `, restart ` + restart + `\n.*checkpoint: `).Match(b) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %s of job %s wrote no checkpoint within 2 minutes:\n%s", restart, job, b)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("%.1fs: interrupting run %s", time.Since(t0).Seconds(), restart)
		how()
		// Slurm holds a requeued job for about two minutes (BeginTime);
		// release it at once.
		s.waitState(t, dir, job, 2*time.Minute, "PENDING")
		t.Logf("%.1fs: requeued", time.Since(t0).Seconds())
		s.run(t, dir, "scontrol", "update", "JobId="+job, "StartTime=now")
	}
	interrupt("0", func() { s.run(t, dir, "scancel", "--batch", "--signal=USR1", job) })
	interrupt("1", func() { s.run(t, dir, "scontrol", "requeue", job) })
	s.waitState(t, dir, job, 3*time.Minute, "COMPLETED", "FAILED", "CANCELLED")
	t.Logf("%.1fs: job %s done", time.Since(t0).Seconds(), job)
	b, _ := os.ReadFile(outFile)
	log2 := string(b)
	for _, line := range []string{
		"train.sbatch: USR1: asking the ranks to checkpoint and stop",
		"train.sbatch: requeueing job " + job,
		"train: slurm job " + job + ", restart 1",
		"train: slurm job " + job + ", restart 2",
	} {
		if !strings.Contains(log2, line) {
			t.Errorf("job output lacks %q", line)
		}
	}
	stops := regexp.MustCompile(`stopped by (SIGUSR1|SIGTERM) at step (\d+): checkpoint written`).FindAllStringSubmatch(log2, -1)
	resumes := regexp.MustCompile(`resume: \S+/step-0*(\d+)\.safetensors`).FindAllStringSubmatch(log2, -1)
	if len(stops) != 2 || stops[0][1] != "SIGUSR1" || stops[1][1] != "SIGTERM" || len(resumes) != 2 {
		t.Fatalf("want a SIGUSR1 stop, a SIGTERM stop and two resumes:\n%s", log2)
	}
	for i := range 2 {
		if resumes[i][1] != stops[i][2] {
			t.Errorf("run %d resumed from step %s, the stop before it checkpointed step %s", i+1, resumes[i][1], stops[i][2])
		}
	}
	m2 := done.FindStringSubmatch(log2)
	if m2 == nil {
		t.Fatalf("the requeued job did not finish:\n%s", log2)
	}
	if got := m2[1]; got != want {
		t.Errorf("interrupted job ended with parameters crc32c %s, the uninterrupted one %s", got, want)
	}
	if strings.Count(log2, "train.sbatch: train exited with 0") != 3 {
		t.Errorf("want three runs that exit 0:\n%s", log2)
	}
	// The run log kept all three runs.
	if b, err := os.ReadFile(filepath.Join(dir, "run.jsonl")); err != nil || strings.Count(string(b), `"type":"start"`) != 4 {
		t.Errorf("run.jsonl: want the start records of one + three runs: %v", err)
	}
	if _, err := os.Stat(ck); err != nil {
		t.Error(err)
	}
	t.Logf("job %s: stopped at steps %s (SIGUSR1) and %s (scontrol requeue), resumed each time, crc32c %s as uninterrupted", job, stops[0][2], stops[1][2], want)
}
