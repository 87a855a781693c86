package e2e

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"train/internal/near"
)

// TestLocalSGD: --strategy local-sgd averages the replicas every
// --sync-every steps instead of the gradients every step. With plain SGD
// and --sync-every 1 that is the same update as allreduce (the mean of
// p - lr g_i is p - lr mean(g_i)); with --sync-every 8 it is not; and a run
// stopped and resumed between averages ends with the same bytes as one
// that was not.
func TestLocalSGD(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	common := []string{"--hidden", "64,32", "--max-steps", "40", "--batch-size", "32", "--momentum", "0", "--log-every", "20"}
	run := func(name string, args ...string) map[string][]float32 {
		_, ts := trainAt(t, 3, 3, dir, name, 40, append(common, args...)...)
		return ts
	}
	ref := run("allreduce")
	every1 := run("local-1", "--strategy", "local-sgd", "--sync-every", "1")
	every8 := run("local-8", "--strategy", "local-sgd", "--sync-every", "8")
	apart := 0.0
	for name, want := range ref {
		if strings.HasPrefix(name, "optimizer.") {
			continue
		}
		if err := near.Check(want, every1[name], 1e-5); err != nil {
			t.Errorf("--sync-every 1 against allreduce: %s: %v", name, err)
		}
		apart = max(apart, near.Diff(want, every8[name]))
	}
	if !(apart >= 1e-4) || math.IsInf(apart, 1) {
		t.Errorf("--sync-every 8 ends within %.3g of allreduce: no local steps taken?", apart)
	}
	t.Logf("--sync-every 8 vs allreduce after 40 steps: relative difference up to %.3g", apart)

	// Resume between averages (30 is not a multiple of 8): checkpoints are
	// sync points in both runs, so the bytes agree.
	if !resumeIsExact(t, 2, "--strategy", "local-sgd", "--sync-every", "8", "--hidden", "64,32", "--batch-size", "32", "--log-every", "20", "--checkpoint-every", "30") {
		t.Error("local-sgd: the resumed run's final checkpoint differs from the uninterrupted run's")
	}
}

// TestLocalSGDAccuracy: model averaging every 8 steps at np=4 still trains
// the MLP to at least 87% on Fashion-MNIST.
func TestLocalSGDAccuracy(t *testing.T) {
	e2e(t)
	r := mustTrain(t, 4, "--strategy", "local-sgd", "--sync-every", "8", "--epochs", "5", "--log-every", "1000")
	m := regexp.MustCompile(`epoch 5/5 done step \d+: .* test loss [0-9.]+ acc ([0-9.]+)%`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no epoch 5 line:\n%s", r.stdout)
	}
	acc, _ := strconv.ParseFloat(m[1], 64)
	if acc < 87 {
		t.Errorf("local-sgd np=4: test accuracy %.2f%% after 5 epochs, want >= 87%%", acc)
	}
	t.Logf("local-sgd np=4 --sync-every 8: %.2f%% after 5 epochs", acc)
}

// TestPlan: train plan prints one row per node count and strategy, with
// efficiencies in (0, 1], and refuses bad input in one line.
func TestPlan(t *testing.T) {
	e2e(t)
	r := trainRun(t, 0, time.Minute, nil, "plan", "--model", "resnet", "--depth", "20", "--compute-ms", "325", "--nodes", "2,4,64", "--servers", "1")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	rows := 0
	for _, line := range strings.Split(r.stdout, "\n") {
		f := strings.Fields(line)
		if len(f) != 7 || f[0] == "nodes" {
			continue
		}
		rows++
		eff, err := strconv.ParseFloat(f[5], 64)
		if err != nil || eff <= 0 || eff > 1 {
			t.Errorf("row %q: efficiency %q", line, f[5])
		}
	}
	if rows != 3*6 {
		t.Errorf("%d rows, want 3 node counts x 6 strategies:\n%s", rows, r.stdout)
	}
	for _, bad := range [][]string{{"--nodes", "0", "--compute-ms", "1"}, {"--nodes", "2"}, {"--compute-ms", "1", "--link-gbps", "0"}} {
		r := trainRun(t, 0, time.Minute, nil, append([]string{"plan"}, bad...)...)
		if r.code == 0 || len(trainLines(r.stderr)) != 1 {
			t.Errorf("plan %v: exit %d, stderr %q: want one line and a failure", bad, r.code, r.stderr)
		}
	}
}

// TestDeviceCudaWithoutGPU: on a machine without the CUDA driver (CI),
// --device cuda ends the job with one line saying what is missing.
func TestDeviceCudaWithoutGPU(t *testing.T) {
	e2e(t)
	if _, err := os.Stat("/dev/nvidiactl"); err == nil {
		t.Skip("this machine has an NVIDIA GPU: the no-driver path cannot be seen here")
	}
	r := trainRun(t, 2, time.Minute, nil, "--device", "cuda", "--max-steps", "1")
	lines := trainLines(r.stderr)
	if r.code == 0 || len(lines) != 1 || !strings.Contains(lines[0], "--device cuda: no CUDA driver: libcuda.so.1") {
		t.Errorf("exit %d, train's lines %q: want one line naming the missing driver", r.code, lines)
	}
	noTrace(t, r)
}

// TestPSSync: synchronous parameter servers reach allreduce's parameters
// (the same workers, batches and optimizer) with one and with two servers,
// optimizer state included (rank 0 fetches it from the servers for the
// checkpoint); a resumed run is bit-exact; a failing server ends the job
// with a line naming it.
func TestPSSync(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	common := []string{"--hidden", "64,32", "--max-steps", "40", "--batch-size", "32", "--log-every", "20"}
	run := func(np int, name string, args ...string) map[string][]float32 {
		_, ts := trainAt(t, np, 2, dir, name, 40, append(common, args...)...) // the 2 workers
		return ts
	}
	ref := run(2, "allreduce")
	for _, tc := range []struct {
		np      int
		servers string
	}{{3, "1"}, {4, "2"}} {
		got := run(tc.np, "ps-"+tc.servers, "--strategy", "ps-sync", "--servers", tc.servers)
		sameTensors(t, tc.servers+" server(s) against allreduce", ref, got, 1e-5)
	}

	ps := []string{"--strategy", "ps-sync", "--servers", "1", "--hidden", "64,32", "--batch-size", "32", "--log-every", "20"}
	if !resumeIsExact(t, 3, ps...) {
		t.Error("ps-sync: the resumed run's final checkpoint differs from the uninterrupted run's")
	}

	r := trainRun(t, 3, time.Minute, []string{"TRAIN_FAULT=2:5:error"}, append(ps, "--max-steps", "60")...)
	if r.code == 0 || !strings.Contains(r.stderr, "train: rank 2: ") {
		t.Errorf("server rank 2 failing: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	noTrace(t, r)
	t.Logf("server failure: job over in %v", r.took.Round(time.Millisecond))
}

// TestPSAsync: asynchronous parameter servers (Downpour). With
// --staleness 0 and plain SGD every worker sees all gradients of a step
// before its next one, which is the synchronous update applied one worker
// at a time: ps-sync's parameters within 1e-5. With a bound of 4 at np=4
// (3 workers) the MLP still reaches 87%, and the server reports the
// staleness it saw, within what the bound allows.
func TestPSAsync(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	common := []string{"--hidden", "64,32", "--max-steps", "40", "--batch-size", "32", "--log-every", "20", "--momentum", "0", "--servers", "1"}
	run := func(name string, args ...string) (map[string][]float32, result) {
		ck := filepath.Join(dir, name)
		r := mustTrain(t, 3, append(append(common, "--checkpoint-dir", ck), args...)...)
		return tensors(t, filepath.Join(ck, "step-00000040.safetensors")), r
	}
	ref, _ := run("sync", "--strategy", "ps-sync")
	got, r := run("async-0", "--strategy", "ps-async", "--staleness", "0")
	sameTensors(t, "--staleness 0 against ps-sync", ref, got, 1e-5)
	stale := regexp.MustCompile(`ps-async server: (\d+) updates, staleness max (\d+), mean ([0-9.]+)`)
	m := stale.FindStringSubmatch(r.stderr)
	if m == nil || m[1] != "80" || m[2] != "1" {
		t.Errorf("--staleness 0 with 2 workers: want 80 updates and staleness at most 1 (the other worker's same-step gradient), got %v\n%s", m, r.stderr)
	}

	r = mustTrain(t, 4, "--strategy", "ps-async", "--servers", "1", "--staleness", "4", "--epochs", "10", "--log-every", "1000")
	acc := regexp.MustCompile(`epoch 10/10 done step \d+: .* test loss [0-9.]+ acc ([0-9.]+)%`).FindStringSubmatch(r.stdout)
	if acc == nil {
		t.Fatalf("no epoch 10 line:\n%s", r.stdout)
	}
	if a, _ := strconv.ParseFloat(acc[1], 64); a < 87 {
		t.Errorf("ps-async np=4: test accuracy %.2f%% after 10 epochs, want >= 87%%", a)
	}
	m = stale.FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("no staleness report:\n%s", r.stderr)
	}
	// Between a worker's pull and its next push, another worker can go from
	// S behind it to S+1 ahead (its last push waiting for an answer): at
	// most (W-1)(2S+1) updates by others, 18 here.
	if s, _ := strconv.Atoi(m[2]); s > 18 {
		t.Errorf("staleness max %d with --staleness 4 and 3 workers, want at most 18", s)
	}
	t.Logf("ps-async np=4 --staleness 4: %s%% after 10 epochs; staleness max %s, mean %s", acc[1], m[2], m[3])

	// Asynchrony itself: with worker rank 1 slowed by 50 ms a step, the
	// other two run S+1 = 5 pushes ahead before the bound holds them, so
	// the slow worker's first push sees 2 x 5 updates by others. Workers
	// in lockstep would see at most 2(W-1) = 4.
	r = trainRun(t, 4, 2*time.Minute, []string{"TRAIN_FAULT=1:0:slow"}, "--strategy", "ps-async", "--servers", "1", "--staleness", "4", "--max-steps", "30", "--log-every", "1000")
	if r.code != 0 {
		t.Fatalf("slowed worker: exit %d\n%s", r.code, r.stderr)
	}
	if m = stale.FindStringSubmatch(r.stderr); m == nil {
		t.Fatalf("no staleness report:\n%s", r.stderr)
	}
	if s, _ := strconv.Atoi(m[2]); s <= 4 || s > 18 {
		t.Errorf("one worker slowed, --staleness 4, 3 workers: staleness max %d, want more than lockstep's 4 and at most 18", s)
	}
	t.Logf("one worker slowed: staleness max %s, mean %s", m[2], m[3])
}

// TestPSAsyncServers: asynchronous servers with more than one server and
// more than two workers under a staleness bound (np=5: 3 workers, 2
// servers, --staleness 1) run several hundred steps to the end, with
// balanced workers and with worker rank 2 niced. A server blocked sending
// an answer to a worker that is busy pushing to the other server, which is
// blocked answering a worker pushing to the first, is a cycle of waits:
// the niced worker's slowness inside MPI set it up every time (3 of 3
// runs hung for the full minute before the fix; one server, same setup: 3 s).
func TestPSAsyncServers(t *testing.T) {
	e2e(t)
	args := []string{"--strategy", "ps-async", "--servers", "2", "--staleness", "1", "--max-steps", "400", "--batch-size", "16", "--log-every", "100"}
	for _, niced := range []bool{false, true} {
		var r result
		if niced {
			r = trainRunNiced(t, 5, 2, 2*time.Minute, nil, args...)
		} else {
			r = trainRun(t, 5, 2*time.Minute, nil, args...)
		}
		if r.code != 0 {
			t.Fatalf("np=5 --servers 2 --staleness 1 (rank 2 niced: %v): exit %d\n%s\n%s", niced, r.code, r.stdout, r.stderr)
		}
		if step, ranks, _ := finalCRC(t, r); step != 400 || ranks != 3 {
			t.Errorf("rank 2 niced: %v: ended at step %d on %d ranks, want 400 on the 3 workers", niced, step, ranks)
		}
		t.Logf("rank 2 niced: %v: 400 steps in %v", niced, r.took.Round(time.Millisecond))
	}
}

// TestPSAsyncBatchNorm: asynchronous workers do not meet in BatchNorm's
// reductions (ps-async uses per-rank statistics; synchronised BatchNorm
// would make them step in lockstep). A ResNet-8 with worker rank 1 slowed
// lets the other worker run ahead to the staleness bound: its pushes land
// between the slow worker's pull and push, more than the 2(W-1) = 2 that
// lockstep allows; the run announces local statistics, and its replicas
// (running statistics averaged at the end) agree.
func TestPSAsyncBatchNorm(t *testing.T) {
	e2e(t)
	// Batches of 4: the fast worker's steps are short beside the slowed
	// one's 50 ms, so it reaches the bound before the slow one's first
	// push (staleness max 5 to 9 in 3 runs; 3 with batches of 16).
	r := trainRun(t, 3, 2*time.Minute, []string{"TRAIN_FAULT=1:0:slow"}, "--model", "resnet", "--depth", "8", "--batch-size", "4",
		"--strategy", "ps-async", "--servers", "1", "--staleness", "4", "--max-steps", "30", "--log-every", "1000")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "batchnorm local") {
		t.Errorf("ps-async ResNet: not per-rank BatchNorm statistics:\n%s", r.stdout)
	}
	m := regexp.MustCompile(`ps-async server: (\d+) updates, staleness max (\d+), mean ([0-9.]+)`).FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("no staleness report:\n%s", r.stderr)
	}
	if s, _ := strconv.Atoi(m[2]); s <= 2 {
		t.Errorf("ResNet ps-async, one worker slowed: staleness max %d, want more than lockstep's 2", s)
	}
	if _, ranks, _ := finalCRC(t, r); ranks != 2 {
		t.Errorf("replica check on %d ranks, want the 2 workers", ranks)
	}
	t.Logf("ResNet-8 ps-async, one worker slowed: staleness max %s, mean %s", m[2], m[3])
}

// TestBenchStrategies runs `train bench strategies` at np=4 on a small MLP
// and checks each row's traffic against what the strategy must move per
// step: the ring (through shared memory: all 4 ranks share this host) and
// MPI_Allreduce the gradient as a collective, a lone synchronous server every worker's
// gradient in and the parameters out, local SGD one ring of parameters
// and momentum every 8 steps.
func TestBenchStrategies(t *testing.T) {
	e2e(t)
	r := mustTrain(t, 4, "bench", "strategies", "--data", "synthetic", "--synthetic-shape", "1x8x8", "--synthetic-samples", "512",
		"--model", "mlp", "--hidden", "32", "--batch-size", "16", "--steps", "16", "--warmup", "0", "--sync-every", "8", "--csv")
	const params = 64*32 + 32 + 32*10 + 10
	const L = 4.0 * params // bytes of the gradient
	rows := map[string][]float64{}
	var names []string
	for _, line := range strings.Split(r.stdout, "\n") {
		f := strings.Split(line, ",")
		if len(f) != 10 || f[0] == "strategy" {
			continue
		}
		var v []float64
		for _, x := range f[1:] {
			n, err := strconv.ParseFloat(x, 64)
			if err != nil {
				t.Fatalf("row %q: %v", line, err)
			}
			v = append(v, n)
		}
		rows[f[0]], names = v, append(names, f[0])
	}
	want := []string{"allreduce ring", "allreduce mpi", "ps-sync 1 server", "ps-sync 2 servers", "ps-async 1 server staleness 4", "local-sgd sync every 8"}
	if strings.Join(names, "|") != strings.Join(want, "|") {
		t.Fatalf("rows %q, want %q\n%s", names, want, r.stdout)
	}
	// Columns after the name: workers, servers, samples/s, ms/step, comm
	// ms, sent, received, busiest rank, collective (bytes per step).
	about := func(row string, col int, want, tol float64) {
		t.Helper()
		if got := rows[row][col]; !near.Close(want, got, tol, 0.5) {
			t.Errorf("%s: column %d = %.1f, want %.1f (within %.0f%%)\n%s", row, col+2, got, want, 100*tol, r.stdout)
		}
	}
	for _, name := range want {
		if v := rows[name]; !(v[2] > 0) || !(v[3] > 0) {
			t.Errorf("%s: samples/s %v ms/step %v", name, v[2], v[3])
		}
	}
	about("allreduce ring", 5, 0, 0) // shm: no point-to-point bytes
	about("allreduce ring", 8, L, 0.01)
	about("allreduce mpi", 5, 0, 0)
	about("allreduce mpi", 8, L, 0.01) // plus the stop check's 8 bytes a step
	about("ps-sync 1 server", 0, 3, 0)
	about("ps-sync 1 server", 7, 2*3*L, 0.01) // plus 24-byte headers
	about("ps-sync 2 servers", 0, 2, 0)
	about("ps-sync 2 servers", 7, 2*2*L/2, 0.01)
	// ps-async with one server: each of the 3 workers pushes its gradient
	// and gets the parameters back every step, as under ps-sync; the
	// server's counters cover its whole service, which also holds each
	// worker's fetch of the parameters at the end (ps-async's sync point):
	// 3 more gradients' worth sent over the 16 steps.
	const s = 16.0
	about("ps-async 1 server staleness 4", 0, 3, 0)
	about("ps-async 1 server staleness 4", 1, 1, 0)
	about("ps-async 1 server staleness 4", 5, (3*L+3*L*(s+1)/s)/4, 0.01)
	about("ps-async 1 server staleness 4", 6, 2*3*L/4, 0.01)
	about("ps-async 1 server staleness 4", 7, 3*L*(2*s+1)/s, 0.01)
	about("local-sgd sync every 8", 5, 1.5*2*L/8, 0)
	if c := rows["allreduce ring"][4]; !(c <= rows["allreduce ring"][3]) {
		t.Errorf("ring: communication wait %.2f ms longer than the step %.2f ms", c, rows["allreduce ring"][3])
	}
}

// TestPSColocated: --colocate runs the servers as goroutines beside the
// workers of ranks 0..K-1 (SINGA's server_worker_separate: false). Two
// ranks with one or two colocated servers reach allreduce's parameters and
// momentum (rank 0 fetches the state from the servers, its own included);
// ps-async colocated with --staleness 0 and plain SGD equals ps-sync; a
// resumed colocated run is bit-exact.
func TestPSColocated(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	common := []string{"--hidden", "64,32", "--max-steps", "40", "--batch-size", "32", "--log-every", "20"}
	run := func(name string, args ...string) map[string][]float32 {
		_, ts := trainAt(t, 2, 2, dir, name, 40, append(common, args...)...) // every rank trains
		return ts
	}
	same := func(what string, ref, got map[string][]float32) {
		t.Helper()
		sameTensors(t, what, ref, got, 1e-5)
	}
	ref := run("allreduce")
	for _, k := range []string{"1", "2"} {
		same("ps-sync --colocate --servers "+k, ref, run("col-"+k, "--strategy", "ps-sync", "--colocate", "--servers", k))
	}
	plain := []string{"--momentum", "0", "--colocate", "--servers", "2"}
	same("ps-async --colocate --staleness 0 against ps-sync --colocate",
		run("sync-plain", append(plain, "--strategy", "ps-sync")...),
		run("async-plain", append(plain, "--strategy", "ps-async", "--staleness", "0")...))
	if !resumeIsExact(t, 2, "--strategy", "ps-sync", "--colocate", "--servers", "2", "--hidden", "64,32", "--batch-size", "32", "--log-every", "20") {
		t.Error("ps-sync --colocate: the resumed run's final checkpoint differs from the uninterrupted run's")
	}
	r := trainRun(t, 3, time.Minute, nil, "--strategy", "ps-sync", "--colocate", "--servers", "4", "--max-steps", "2")
	if r.code == 0 || !strings.Contains(r.stderr, "--colocate --servers 4: need 1 to 3 servers") {
		t.Errorf("--colocate --servers 4 on 3 ranks: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

// TestDownpourPushFetch: ps-async's --push-every and --fetch-every
// (Downpour's n_push and n_fetch). One worker pushing the sum of 4 steps'
// gradients and fetching every 4 steps, with plain SGD at a constant rate,
// takes the steps of one process with 4 times the batch and the rate
// (1e-5); with 2 workers pushing every 2 and fetching every 3 steps for 43
// steps, each server applies 22 pushes per worker (the last, a held step's
// gradient, sent before the final fetch) and the replicas end identical;
// a run stopped at step 21 resumes from there; the flags are refused
// outside ps-async.
func TestDownpourPushFetch(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	common := []string{"--hidden", "64,32", "--lr-schedule", "constant", "--momentum", "0", "--log-every", "20"}
	mustTrain(t, 1, append(common, "--batch-size", "64", "--lr", "0.04", "--max-steps", "10", "--checkpoint-dir", filepath.Join(dir, "ref"))...)
	got := mustTrain(t, 2, append(common, "--batch-size", "16", "--lr", "0.01", "--max-steps", "40", "--checkpoint-dir", filepath.Join(dir, "dp"),
		"--strategy", "ps-async", "--servers", "1", "--push-every", "4", "--fetch-every", "4")...)
	if !strings.Contains(got.stderr, "ps-async server: 10 updates") {
		t.Errorf("push every 4 steps of 40: want 10 updates\n%s", got.stderr)
	}
	a := tensors(t, filepath.Join(dir, "ref", "step-00000010.safetensors"))
	b := tensors(t, filepath.Join(dir, "dp", "step-00000040.safetensors"))
	sameTensors(t, "--push-every 4 --fetch-every 4 against batch x4", a, b, 1e-5)

	r := mustTrain(t, 3, append(common, "--batch-size", "16", "--lr", "0.01", "--max-steps", "43",
		"--strategy", "ps-async", "--servers", "1", "--staleness", "-1", "--push-every", "2", "--fetch-every", "3")...)
	if _, ranks, _ := finalCRC(t, r); ranks != 2 {
		t.Errorf("replica check on %d ranks, want the 2 workers", ranks)
	}
	if !strings.Contains(r.stderr, "ps-async server: 44 updates") {
		t.Errorf("2 workers pushing every 2 steps of 43: want 44 updates\n%s", r.stderr)
	}

	// Resume under ps-async: rank 0 saved the servers' state at step 21
	// (the held gradient of step 21 pushed first); a restart carries on.
	ck := filepath.Join(dir, "resume")
	resume := append(common, "--batch-size", "16", "--lr", "0.01", "--strategy", "ps-async", "--servers", "1", "--push-every", "2", "--checkpoint-dir", ck)
	mustTrain(t, 3, append(resume, "--max-steps", "21")...)
	r = mustTrain(t, 3, append(resume, "--max-steps", "30", "--resume")...)
	if !strings.Contains(r.stdout, "step-00000021.safetensors (step 21") {
		t.Errorf("ps-async --resume: not from step 21:\n%s", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(ck, "step-00000030.safetensors")); err != nil {
		t.Errorf("ps-async --resume: %v", err)
	}

	r = trainRun(t, 2, time.Minute, nil, "--push-every", "2", "--max-steps", "2")
	if r.code == 0 || !strings.Contains(r.stderr, "--push-every 2 is not used with --strategy allreduce: it is for --strategy ps-async") {
		t.Errorf("--push-every with allreduce: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}
