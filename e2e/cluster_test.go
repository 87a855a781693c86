package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"train/internal/near"
)

const clusterScript = "scripts/cluster/cluster.sh"

// cluster makes hosts network-namespace hosts with slots each (tc-shaped to
// rate unless ""), removed again when the test ends, pass or fail; the
// test fails if anything is left. It returns the mpirun options that
// launch across them. Without root or iproute2 the test skips, saying so.
func cluster(t *testing.T, hosts, slots int, rate string) []string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: network namespaces need root (CI runs the suite as root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("skipped: no ip (iproute2); scripts/setup.sh --test installs it")
	}
	dir := t.TempDir()
	run := func(args ...string) (string, error) {
		out, err := exec.Command(clusterScript, args...).CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		if out, err := run("down", dir); err != nil {
			t.Errorf("cluster down: %v\n%s", err, out)
		}
		if out, err := run("check", dir); err != nil {
			t.Errorf("cluster left something behind: %v\n%s", err, out)
		}
	})
	if out, err := run("up", dir, strconv.Itoa(hosts), rate, strconv.Itoa(slots)); err != nil {
		t.Fatalf("cluster up: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "mpirun.args"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// TestMultiHost: 2 hosts x 2 ranks, each host a network namespace, the
// ranks talking over TCP between hosts (shared memory within one): a real
// training run across them keeps the replicas identical and reaches the
// parameters of 4 ranks on one host within 1e-5, for the ring, the
// hierarchical allreduce and MPI_Allreduce.
func TestMultiHost(t *testing.T) {
	e2e(t)
	args := cluster(t, 2, 2, "")
	dir := t.TempDir()
	common := []string{"--hidden", "64,32", "--batch-size", "16", "--max-steps", "30", "--log-every", "10"}
	mustTrain(t, 4, append(common, "--checkpoint-dir", filepath.Join(dir, "ref"))...)
	want := tensors(t, filepath.Join(dir, "ref", "step-00000030.safetensors"))
	for _, algo := range []string{"ring", "hier", "mpi"} {
		ck := filepath.Join(dir, algo)
		r := trainRunMPI(t, 4, args, 2*time.Minute, nil, append(common, "--allreduce", algo, "--checkpoint-dir", ck)...)
		if r.code != 0 {
			t.Fatalf("%s across hosts: exit %d\n%s\n%s", algo, r.code, r.stdout, r.stderr)
		}
		if _, ranks, _ := finalCRC(t, r); ranks != 4 {
			t.Errorf("%s: replica check on %d ranks", algo, ranks)
		}
		if algo == "hier" && !strings.Contains(r.stdout, "allreduce hier (2 hosts)") {
			t.Errorf("hier: not over 2 hosts:\n%s", r.stdout)
		}
		got := tensors(t, filepath.Join(ck, "step-00000030.safetensors"))
		sameTensors(t, algo+" across 2 hosts against 4 ranks on one host", want, got, 1e-5)
	}
}

// TestMultiHostOtherSize: across 2 hosts of one rank each, a rank that
// passes an empty slice at step 5 (TRAIN_FAULT=1:5:empty) meets the other
// in the ring, for the world's ring and for hier's leaders' ring alike:
// both find the other's slice in the step's first message and the job
// stops with their lines (one or both, as the abort lets them print) and
// every rank's dump, where before rank 1 returned at once and rank 0
// waited for the watchdog. Across hosts there is no shared segment.
func TestMultiHostOtherSize(t *testing.T) {
	e2e(t)
	args := cluster(t, 2, 1, "")
	lines := []string{
		"train: rank 0: ring reduce-scatter of 203530 floats: rank 1's message holds 0 floats where this rank expected 65536, from a slice of another length: every rank must pass the same slice",
		"train: rank 1: ring reduce-scatter of 0 floats: rank 0's message holds 65536 floats where this rank expected 0, from a slice of another length: every rank must pass the same slice",
	}
	for _, algo := range []string{"ring", "hier"} {
		t.Run(algo, func(t *testing.T) {
			dir := t.TempDir()
			r := trainRunMPI(t, 2, args, time.Minute, []string{"TRAIN_FAULT=1:5:empty"}, flightArgs(dir, "--max-steps", "8", "--allreduce", algo)...)
			got := trainLines(r.stderr)
			ok := r.code != 0 && len(got) >= 1 && len(got) <= 2
			for _, l := range got {
				ok = ok && slices.Contains(lines, l)
			}
			if !ok {
				t.Fatalf("exit %d, want 1 or 2 of the lines %q:\n%s", r.code, lines, r.stderr)
			}
			noTrace(t, r)
			// Of two ranks the doctor cannot say which is the odd one,
			// only what each called.
			f := first(t, doctor(t, dir, 2, "abort"), "mismatch")
			if f.Call.Step != 5 || !strings.Contains(f.Text, "rank 1 called it with a different size: allreduce ("+algo+") of 0 B float32") ||
				!strings.Contains(f.Text, "rank 0: allreduce ("+algo+") of 814.1 KB float32") {
				t.Errorf("finding %+v", f)
			}
		})
	}
}

// TestClusterCleanup: a cluster that fails half-way up (tc refuses the
// rate) removes what it made, and down after a normal up leaves nothing.
func TestClusterCleanup(t *testing.T) {
	e2e(t)
	if os.Geteuid() != 0 {
		t.Skip("skipped: network namespaces need root (CI runs the suite as root)")
	}
	dir := t.TempDir()
	out, err := exec.Command(clusterScript, "up", dir, "2", "no-such-rate").CombinedOutput()
	if err == nil {
		t.Fatalf("up with a bad rate succeeded:\n%s", out)
	}
	if out, err := exec.Command(clusterScript, "check", dir).CombinedOutput(); err != nil {
		t.Errorf("after a failed up: %v\n%s", err, out)
	}
	args := cluster(t, 3, 1, "100mbit")
	if len(args) == 0 {
		t.Fatal("no mpirun options")
	}
}

// TestCompress: --compress fp16 and bf16 train with replicas identical
// and end near the uncompressed run. The gap grows with the format's
// rounding: measured after 30 steps of this MLP, fp16 (11-bit significand)
// 9e-4 relative at worst, bf16 (8 bits) 0.13 (the momentum buffers carry
// the accumulated difference; a single allreduce's error is 8 times
// fp16's, as the formats say). With MPI_Allreduce it is refused.
func TestCompress(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	common := []string{"--hidden", "64,32", "--batch-size", "16", "--max-steps", "30", "--log-every", "10"}
	run := func(name string, args ...string) map[string][]float32 {
		r, ts := trainAt(t, 3, 3, dir, name, 30, append(common, args...)...)
		if name != "none" && !strings.Contains(r.stdout, name+" on the wire") {
			t.Errorf("%s: not announced:\n%s", name, r.stdout)
		}
		return ts
	}
	ref := run("none")
	gap := map[string]float64{}
	for _, c := range []string{"fp16", "bf16"} {
		got := run(c, "--compress", c)
		for name, want := range ref {
			gap[c] = max(gap[c], near.Diff(want, got[name]))
		}
		t.Logf("--compress %s: largest relative difference from float32 after 30 steps %.3g", c, gap[c])
	}
	if gap["fp16"] == 0 || gap["fp16"] > 0.01 || gap["bf16"] <= gap["fp16"] || gap["bf16"] > 0.3 {
		t.Errorf("differences from float32: fp16 %.3g (want (0, 0.01]), bf16 %.3g (want above fp16's, at most 0.3)", gap["fp16"], gap["bf16"])
	}
	r := trainRun(t, 2, time.Minute, nil, "--compress", "bf16", "--allreduce", "mpi", "--max-steps", "2")
	if r.code == 0 || !strings.Contains(r.stderr, "--compress bf16: compresses the gradients") {
		t.Errorf("--compress with --allreduce mpi: exit %d\n%s", r.code, r.stderr)
	}
}

// TestBucketAuto: --bucket-mb auto tries the sizes that give this MLP
// (784-256-256-10) different buckets (1/4 MiB: 2, 1 MiB: 1) for 6 steps
// each, keeps the fastest on every rank alike and says so. The choice
// depends on timing, so two runs may choose differently; what must hold is
// that a resumed run keeps the choice saved in the checkpoint: resumed
// with auto it says so and ends with the same bytes as resumed with that
// size given outright. A size that is not a number is refused.
func TestBucketAuto(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	args := []string{"--hidden", "256,256", "--batch-size", "32", "--log-every", "10"}
	r := mustTrain(t, 2, append(args, "--bucket-mb", "auto", "--max-steps", "30", "--checkpoint-dir", a)...)
	m := regexp.MustCompile(`bucket autotune: ms per step on the slowest rank, 0.25 MiB [0-9.]+ ms, 1 MiB [0-9.]+ ms: keeping (0.25|1) MiB`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no autotune line:\n%s", r.stdout)
	}
	if _, ranks, _ := finalCRC(t, r); ranks != 2 {
		t.Errorf("replica check on %d ranks", ranks)
	}
	if out, err := exec.Command("cp", "-r", a, b).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	r = mustTrain(t, 2, append(args, "--bucket-mb", "auto", "--max-steps", "60", "--checkpoint-dir", a, "--resume")...)
	if !strings.Contains(r.stdout, "bucket autotune: "+m[1]+" MiB, as chosen before the checkpoint") {
		t.Errorf("resumed with auto: not the saved %s MiB:\n%s", m[1], r.stdout)
	}
	mustTrain(t, 2, append(args, "--bucket-mb", m[1], "--max-steps", "60", "--checkpoint-dir", b, "--resume")...)
	// The tensors, not the files: only the auto run's metadata records
	// bucket_bytes.
	ta, tb := tensors(t, filepath.Join(a, "step-00000060.safetensors")), tensors(t, filepath.Join(b, "step-00000060.safetensors"))
	sameTensors(t, "resumed with auto against --bucket-mb "+m[1], ta, tb, 0)
	r = trainRun(t, 2, time.Minute, nil, "--bucket-mb", "lots", "--max-steps", "2")
	if r.code == 0 || !strings.Contains(r.stderr, `--bucket-mb "lots": want a size in MiB`) {
		t.Errorf("--bucket-mb lots: exit %d\n%s", r.code, r.stderr)
	}
}
