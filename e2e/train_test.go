package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"train/internal/near"
	"train/mpi/mpitest"
	"train/runlog"
)

// TestDataParallelEquivalence: N ranks with per-rank batch B reach the
// parameters one process reaches with batch N x B (the sampler gives both
// the same global batches), and all ranks agree bit for bit.
func TestDataParallelEquivalence(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	const steps = "50"
	ck := func(name string) string { return filepath.Join(dir, name) }
	mustTrain(t, 1, "--batch-size", "96", "--max-steps", steps, "--checkpoint-dir", ck("np1"), "--log-every", "10")
	ref := tensors(t, filepath.Join(ck("np1"), "step-00000050.safetensors"))
	for _, np := range []int{2, 3} {
		r := mustTrain(t, np, "--batch-size", strconv.Itoa(96/np), "--max-steps", steps, "--checkpoint-dir", ck(fmt.Sprint(np)), "--log-every", "10")
		if _, ranks, _ := finalCRC(t, r); ranks != np {
			t.Errorf("np=%d: closing line speaks of %d ranks", np, ranks)
		}
		got := tensors(t, filepath.Join(ck(fmt.Sprint(np)), "step-00000050.safetensors"))
		if len(got) != len(ref) || len(got) != 8 {
			t.Fatalf("np=%d: %d tensors, np=1 has %d", np, len(got), len(ref))
		}
		// Relative tolerance 1e-5 on each tensor, measured against its
		// largest element: summation order differs between the runs, so
		// bits may too, by float32 rounding (about 1e-7) per step.
		sameTensors(t, fmt.Sprintf("np=%d against np=1", np), ref, got, 1e-5)
		for name, want := range ref {
			t.Logf("np=%d: %s: relative difference %.2g", np, name, near.Diff(want, got[name]))
		}
	}
}

// TestResumeBitExact: a run stopped at step 30 and resumed to 60 ends with
// the same bytes as one that ran 60 steps straight, across an epoch
// boundary (58 steps per epoch here).
func TestResumeBitExact(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	straight, split := filepath.Join(dir, "straight"), filepath.Join(dir, "split")
	common := []string{"--batch-size", "512", "--epochs", "2", "--log-every", "10"}
	mustTrain(t, 2, append(common, "--max-steps", "60", "--checkpoint-dir", straight)...)
	mustTrain(t, 2, append(common, "--max-steps", "30", "--checkpoint-dir", split, "--checkpoint-every", "20")...)
	r := mustTrain(t, 2, append(common, "--max-steps", "60", "--checkpoint-dir", split, "--resume")...)
	if !strings.Contains(r.stdout, "resume: "+filepath.Join(split, "step-00000030.safetensors")+" (step 30, epoch 1)") {
		t.Errorf("did not resume from step 30:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "epoch 1/2 done step 58") {
		t.Errorf("resumed run did not finish epoch 1 at step 58:\n%s", r.stdout)
	}
	if !sameFiles(t, filepath.Join(straight, "step-00000060.safetensors"), filepath.Join(split, "step-00000060.safetensors")) {
		t.Error("resumed run's final checkpoint differs from the uninterrupted run's")
	}
	// Both legs' checkpoints, pruned to the newest three.
	names, _ := filepath.Glob(filepath.Join(split, "*"))
	if len(names) != 3 {
		t.Errorf("split run left %v", names)
	}
}

// TestResumeOtherWorldSize: a run resumed on another number of ranks
// follows the learning-rate curve of the run it continues, over samples:
// Fashion-MNIST's 60,000 samples at 64 per rank make 59,904 samples per
// epoch at 2 and at 4 ranks, so the cosine decay over one epoch is
// lr(p) = 0.05 * (1 + cos(pi p / 59904)) / 2 at sample position p, before
// and after the resume (2 -> 4 ranks and 4 -> 2), up to the epoch's end.
func TestResumeOtherWorldSize(t *testing.T) {
	e2e(t)
	for _, tc := range []struct{ from, to, steps int }{{2, 4, 300}, {4, 2, 100}} {
		t.Run(fmt.Sprintf("np %d to %d", tc.from, tc.to), func(t *testing.T) {
			dir := t.TempDir()
			ck, log := filepath.Join(dir, "ck"), filepath.Join(dir, "run.jsonl")
			args := []string{"--hidden", "32", "--epochs", "1", "--log-every", "1", "--checkpoint-dir", ck, "--log-file", log}
			mustTrain(t, tc.from, append(args, "--max-steps", strconv.Itoa(tc.steps))...)
			mustTrain(t, tc.to, append(args, "--resume")...)
			recs, err := runlog.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			const total = 59904.0
			first := tc.steps * 64 * tc.from // samples before the resume
			last, checked, wrong := 0, 0, 0
			for _, rec := range recs {
				if rec.Type != "step" || rec.LR == nil {
					continue
				}
				// A step record carries the rate of the step it ends: the
				// step that started at sample position p.
				k := rec.Step - 1
				p := k * 64 * tc.from
				if k >= tc.steps {
					p = first + (k-tc.steps)*64*tc.to
				}
				want := 0.05 * (1 + math.Cos(math.Pi*float64(p)/total)) / 2
				if !near.Close(want, *rec.LR, 1e-9, 1e-12) {
					if wrong++; wrong <= 5 {
						t.Errorf("step %d (sample %d, %d ranks): lr %v, want %v", rec.Step, p, map[bool]int{true: tc.from, false: tc.to}[k < tc.steps], *rec.LR, want)
					}
				}
				last, checked = rec.Step, checked+1
			}
			if wrong > 5 {
				t.Errorf("... %d steps in all with the wrong rate", wrong)
			}
			// The epoch ends when its samples are used up, at either size.
			if want := tc.steps + (int(total)-first)/(64*tc.to); last != want || checked != want {
				t.Errorf("%d step records, the last at step %d; want %d, to the epoch's end", checked, last, want)
			}
		})
	}
}

// TestRanks runs at np = 1, 2, 3 under mpirun and without mpirun, where
// the flags come from TRAIN_* variables instead.
func TestRanks(t *testing.T) {
	e2e(t)
	for _, np := range []int{1, 2, 3} {
		r := mustTrain(t, np, "--max-steps", "20", "--log-every", "10")
		if step, ranks, _ := finalCRC(t, r); step != 20 || ranks != np {
			t.Errorf("np=%d: finished step %d on %d ranks", np, step, ranks)
		}
		noTrace(t, r)
	}
	r := trainRun(t, 0, time.Minute, []string{"TRAIN_MAX_STEPS=7", "TRAIN_HIDDEN=32,16", "TRAIN_LOG_EVERY=7"})
	if r.code != 0 {
		t.Fatalf("without mpirun: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if step, ranks, _ := finalCRC(t, r); step != 7 || ranks != 1 {
		t.Errorf("without mpirun: step %d on %d ranks", step, ranks)
	}
	// 784-32-16-10: the hidden sizes came from TRAIN_HIDDEN.
	if !strings.Contains(r.stdout, "mlp model, 25818 parameters") {
		t.Errorf("TRAIN_HIDDEN not applied:\n%s", r.stdout)
	}
}

// copyData makes a dataset directory whose train-images file is replaced
// by corrupt(raw bytes of the real one), stored raw.
func copyData(t *testing.T, corrupt func([]byte) []byte) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"} {
		if err := os.Symlink(filepath.Join(fashion, f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(filepath.Join(rawFashion, "train-images-idx3-ubyte"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "train-images-idx3-ubyte"), corrupt(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// dirBytes reads every file of dir, to prove a failed run changed none.
func dirBytes(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// TestBadInput: each mistake ends the job with one line from train naming
// the file or flag and what to do, a non-zero exit, no Go trace, no hang,
// and existing checkpoints untouched.
func TestBadInput(t *testing.T) {
	e2e(t)
	alongside(t)
	tmp := t.TempDir()
	// A checkpoint directory that failed runs must leave alone.
	ckpts := filepath.Join(tmp, "ck")
	mustTrain(t, 2, "--max-steps", "20", "--checkpoint-every", "10", "--checkpoint-dir", ckpts, "--log-every", "10")
	before := dirBytes(t, ckpts)

	aFile := filepath.Join(tmp, "a-file")
	os.WriteFile(aFile, []byte("x"), 0o644)
	truncated := copyData(t, func(raw []byte) []byte { return raw[:len(raw)/2] })
	badMagic := copyData(t, func(raw []byte) []byte { raw[0], raw[1] = 'P', 'K'; return raw })

	cases := []struct {
		name string
		np   int
		args []string
		want []string // all in the one line
	}{
		{"missing dataset", 2, []string{"--data", "/nonexistent/fmnist"}, []string{"--data /nonexistent/fmnist", "scripts/setup.sh"}},
		{"missing dataset, no mpirun", 0, []string{"--data", "/nonexistent/fmnist"}, []string{"scripts/setup.sh"}},
		{"truncated IDX", 2, []string{"--data", truncated}, []string{filepath.Join(truncated, "train-images-idx3-ubyte"), "truncated"}},
		{"wrong magic", 2, []string{"--data", badMagic}, []string{filepath.Join(badMagic, "train-images-idx3-ubyte"), "not an IDX file"}},
		{"unknown model", 2, []string{"--model", "transformer"}, []string{`unknown model "transformer"`, "mlp"}},
		{"batch larger than shard", 2, []string{"--batch-size", "40000"}, []string{"--batch-size 40000", "lower --batch-size"}},
		{"unwritable checkpoint dir", 2, []string{"--checkpoint-dir", filepath.Join(aFile, "ck")}, []string{"--checkpoint-dir " + filepath.Join(aFile, "ck"), "not a directory"}},
		{"unknown allreduce", 2, []string{"--allreduce", "carrier-pigeon"}, []string{`--allreduce "carrier-pigeon"`}},
		{"unknown flag", 2, []string{"--bogus"}, []string{"bogus", "train --help"}},
		{"bad number", 0, []string{"--epochs", "five"}, []string{"five"}},
		{"resume without dir", 2, []string{"--resume"}, []string{"--resume needs --checkpoint-dir"}},
		// Files written later in the run are checked at its start.
		{"unwritable log file", 2, []string{"--log-file", filepath.Join(aFile, "log.jsonl")}, []string{"--log-file", "not a directory"}},
		{"plot in a missing directory", 0, []string{"--plot", filepath.Join(tmp, "nodir", "curves.png")}, []string{"--plot " + filepath.Join(tmp, "nodir", "curves.png"), "no directory"}},
		{"unwritable flight dir", 2, []string{"--flight-dir", filepath.Join(aFile, "flight")}, []string{"--flight-dir " + filepath.Join(aFile, "flight"), "not a directory"}},
		// 784 x 1e9 + 1e9 weights and biases into the hidden layer, 1e9 x 10
		// + 10 out of it: 6 TB with the gradients.
		{"model larger than the machine", 0, []string{"--hidden", "1000000000"}, []string{"--model mlp: 795000000010 parameters", "GiB of memory and swap", "smaller model"}},
		{"--openblas that does not load", 0, []string{"--openblas", "libopenblas-missing.so.0"}, []string{"--openblas libopenblas-missing.so.0", "none for the plain C loops"}},
		// Options that another choice makes meaningless are refused, not
		// ignored.
		{"--allreduce under ps-sync", 3, []string{"--strategy", "ps-sync", "--allreduce", "hier"}, []string{"--allreduce hier", "ps-sync"}},
		{"--allreduce under ps-async", 3, []string{"--strategy", "ps-async", "--allreduce", "mpi"}, []string{"--allreduce mpi", "ps-async"}},
		{"--staleness under ps-sync", 3, []string{"--strategy", "ps-sync", "--staleness", "2"}, []string{"--staleness", "ps-async"}},
		{"--servers without servers", 2, []string{"--servers", "2"}, []string{"--servers", "ps-sync"}},
		{"--sync-every without local-sgd", 2, []string{"--sync-every", "4"}, []string{"--sync-every", "local-sgd"}},
		{"--bn sync under local-sgd", 2, []string{"--strategy", "local-sgd", "--bn", "sync"}, []string{"--bn sync", "local-sgd"}},
		{"--bucket-mb under local-sgd", 2, []string{"--strategy", "local-sgd", "--bucket-mb", "4"}, []string{"--bucket-mb", "local-sgd"}},
		{"bench allreduce --device cuda --segment-kb", 2, []string{"bench", "allreduce", "--device", "cuda", "--segment-kb", "64"}, []string{"--segment-kb", "--device cuda"}},
		{"bench allreduce --device cuda --slots", 2, []string{"bench", "allreduce", "--device", "cuda", "--slots", "2"}, []string{"--slots", "--device cuda"}},
	}
	// The cases run side by side (t.Parallel, within go test's -parallel):
	// each spends most of its time in mpirun's teardown, 1 s after a rank
	// exits non-zero (26 of them in sequence took 48 s). The group ends
	// when every case has, before the checkpoint directory is compared.
	t.Run("case", func(t *testing.T) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				args := tc.args
				if args[0] != "bench" {
					args = append(args, "--max-steps", "5")
				}
				r := trainRun(t, tc.np, time.Minute, nil, args...)
				if r.code == 0 {
					t.Fatalf("exit 0\n%s%s", r.stdout, r.stderr)
				}
				lines := trainLines(r.stderr)
				if len(lines) != 1 {
					t.Fatalf("want one line from train, got %d:\n%s", len(lines), r.stderr)
				}
				for _, w := range tc.want {
					if !strings.Contains(lines[0], w) {
						t.Errorf("line %q lacks %q", lines[0], w)
					}
				}
				noTrace(t, r)
				t.Logf("exit %d in %v: %s", r.code, r.took.Round(time.Millisecond), lines[0])
			})
		}
	})
	after := dirBytes(t, ckpts)
	if len(after) != len(before) {
		t.Errorf("checkpoint dir had %d files, now %d", len(before), len(after))
	}
	for name, b := range before {
		if !bytes.Equal(after[name], b) {
			t.Errorf("%s changed", name)
		}
	}
}

// TestRanksDisagree: ranks started with other options than rank 0's (an
// mpirun MPMD line, a TRAIN_* variable on one host) end the job at its
// start with one line naming the rank and the option, instead of a
// truncated broadcast, a hang, or (--seed) overlapping shards trained
// silently.
func TestRanksDisagree(t *testing.T) {
	e2e(t)
	for _, tc := range []struct {
		name string
		rank [][]string // each rank's command
		want string
	}{
		{"--hidden", [][]string{{bin, "--hidden", "128"}, {bin, "--hidden", "64"}}, "train: rank 1: --hidden [64] here, --hidden [128] on rank 0"},
		{"TRAIN_SEED", [][]string{{bin}, {bin}, {"env", "TRAIN_SEED=2", bin}}, "train: rank 2: --seed 2 here, --seed 1 on rank 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			argv := append([]string{"mpirun"}, mpitest.Args(len(tc.rank))[2:]...) // the options without -np
			for i, cmd := range tc.rank {
				if i > 0 {
					argv = append(argv, ":")
				}
				argv = append(append(argv, "-np", "1"), append(cmd, "--max-steps", "5")...)
			}
			r := runArgv(t, len(tc.rank), time.Minute, nil, argv)
			if r.code == 0 {
				t.Fatalf("exit 0\n%s%s", r.stdout, r.stderr)
			}
			lines := trainLines(r.stderr)
			if len(lines) != 1 || !strings.HasPrefix(lines[0], tc.want) {
				t.Fatalf("want one line starting %q, got:\n%s", tc.want, r.stderr)
			}
			if strings.Contains(r.stdout, "step 1") {
				t.Errorf("trained before refusing:\n%s", r.stdout)
			}
			noTrace(t, r)
			t.Logf("exit %d in %v: %s", r.code, r.took.Round(time.Millisecond), lines[0])
		})
	}
}

// TestRankFailure: a failure on one rank ends every rank within 10 s with
// a message naming the rank. The four jobs run side by side (parallel
// subtests of a test in sequence with the rest: nothing else runs beside
// them); each ended in 2.1 to 2.4 s alone, most of it mpirun's teardown.
func TestRankFailure(t *testing.T) {
	e2e(t)
	for _, tc := range []struct {
		np    int
		fault string
		want  string
	}{
		{2, "1:5:error", "train: rank 1: injected fault at step 5"},
		{3, "2:5:error", "train: rank 2: injected fault at step 5"},
		{3, "1:5:panic", "train: rank 1: internal error: injected panic at step 5"},
		{2, "1:5:kill", "rank 1"}, // mpirun's own report of the killed rank
	} {
		t.Run(fmt.Sprintf("np=%d,%s", tc.np, tc.fault), func(t *testing.T) {
			t.Parallel()
			r := trainRun(t, tc.np, 30*time.Second, []string{"TRAIN_FAULT=" + tc.fault}, "--log-every", "1")
			if r.code == 0 {
				t.Fatalf("exit 0 despite the fault\n%s", r.stderr)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, r.stderr)
			}
			if r.took > 10*time.Second {
				t.Errorf("job took %v to end, want under 10 s", r.took)
			}
			// Rank 0 got no further than the faulty step.
			if regexp.MustCompile(`step (6|7|8|9|10) `).MatchString(r.stdout) {
				t.Errorf("training went on past the fault:\n%s", r.stdout)
			}
			noTrace(t, r)
			t.Logf("ended in %v", r.took.Round(time.Millisecond))
		})
	}
}

// TestAccuracy: the default MLP reaches 88% test accuracy on Fashion-MNIST
// (the .gz files Debian installs, as the README's first command reads them)
// within 5 epochs at np=2.
func TestAccuracy(t *testing.T) {
	e2e(t)
	// OpenMPI's own choice of point-to-point layer, as a user's mpirun
	// makes it (Debian's setting; every other job names ob1, the layer it
	// picks, to skip the probe: mpitest.FastStart).
	args := []string{"--data", fashion, "--epochs", "5", "--log-every", "1000"}
	r := trainRun(t, 2, 3*time.Minute, []string{"OMPI_MCA_pml=^ucx"}, args...)
	if r.code != 0 {
		t.Fatalf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", args, r.code, r.stdout, r.stderr)
	}
	m := regexp.MustCompile(`epoch 5/5 done step \d+: .* test loss [0-9.]+ acc ([0-9.]+)%`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no epoch 5 line:\n%s", r.stdout)
	}
	acc, _ := strconv.ParseFloat(m[1], 64)
	if acc < 88 {
		t.Errorf("test accuracy %.2f%% after 5 epochs, want >= 88%%", acc)
	}
	t.Logf("test accuracy %.2f%% in %v", acc, r.took.Round(100*time.Millisecond))
}

// TestTorchLoadsCheckpoint: PyTorch loads a checkpoint into the module the
// README defines with load_state_dict(strict=True), and its test loss and
// accuracy are ours: the names, shapes and forward pass all agree.
func TestTorchLoadsCheckpoint(t *testing.T) {
	e2e(t)
	ck := t.TempDir()
	r := mustTrain(t, 2, "--epochs", "1", "--hidden", "128,64", "--checkpoint-dir", ck, "--log-every", "1000")
	m := regexp.MustCompile(`epoch 1/1 done step (\d+): .* test loss ([0-9.]+) acc ([0-9.]+)%`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no epoch line:\n%s", r.stdout)
	}
	ourLoss, _ := strconv.ParseFloat(m[2], 64)
	ourAcc, _ := strconv.ParseFloat(m[3], 64)
	path := filepath.Join(ck, fmt.Sprintf("step-%08s.safetensors", m[1]))
	out, err := exec.Command("/usr/bin/python3", "scripts/torch_check.py", path, fashion).CombinedOutput()
	if err != nil {
		t.Fatalf("torch_check.py: %v\n%s(install python3-torch with scripts/setup.sh --test)", err, out)
	}
	var got struct {
		Step     int
		Loss     float64
		Accuracy float64
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("torch_check.py printed %q: %v", out, err)
	}
	// Our figures are printed to 4 and 2 decimals; the forward passes
	// differ only in summation order, which may flip a near-tie or two.
	if !near.Close(ourLoss, got.Loss, 0, 1e-4) || !near.Close(ourAcc, got.Accuracy, 0, 0.021) {
		t.Errorf("PyTorch: loss %.6f acc %.2f%%; train: loss %.4f acc %.2f%%", got.Loss, got.Accuracy, ourLoss, ourAcc)
	}
	t.Logf("PyTorch: loss %.6f acc %.2f%%; train: loss %.4f acc %.2f%%", got.Loss, got.Accuracy, ourLoss, ourAcc)
}

// TestAllreduceAlgorithms: --allreduce ring reaches the parameters of
// --allreduce mpi, in one bucket or many, overlapped with backward or not
// (np=3: chunks of unequal length; 0.001 MiB buckets: one per layer of
// the 784-64-32-10 MLP, so three).
func TestAllreduceAlgorithms(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	common := []string{"--hidden", "64,32", "--max-steps", "40", "--batch-size", "32", "--log-every", "20"}
	run := func(name string, args ...string) map[string][]float32 {
		ck := filepath.Join(dir, name)
		r := mustTrain(t, 3, append(append(common, "--checkpoint-dir", ck), args...)...)
		if _, ranks, _ := finalCRC(t, r); ranks != 3 {
			t.Fatalf("%s: replica check on %d ranks", name, ranks)
		}
		buckets := "in 1 bucket(s)"
		if strings.Contains(name, "buckets") {
			buckets = "in 3 bucket(s)"
		}
		if !strings.Contains(r.stdout, buckets) {
			t.Errorf("%s: not %s:\n%s", name, buckets, r.stdout)
		}
		return tensors(t, filepath.Join(ck, "step-00000040.safetensors"))
	}
	ref := run("mpi-1", "--allreduce", "mpi", "--bucket-mb", "0", "--overlap=false")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"ring-1", []string{"--allreduce", "ring", "--bucket-mb", "0", "--overlap=false"}},
		{"ring-buckets-overlap", []string{"--allreduce", "ring", "--bucket-mb", "0.001", "--overlap"}},
		{"ring-buckets", []string{"--allreduce", "ring", "--bucket-mb", "0.001", "--overlap=false"}},
		{"mpi-buckets-overlap", []string{"--allreduce", "mpi", "--bucket-mb", "0.001", "--overlap"}},
	} {
		got := run(tc.name, tc.args...)
		sameTensors(t, tc.name+" against mpi", ref, got, 1e-5)
	}
}

// TestBenchAllreduce: `train bench allreduce --csv` under mpirun gives one
// row per size and algorithm, every element right, positive bandwidths;
// bad sizes are one-line errors.
func TestBenchAllreduce(t *testing.T) {
	e2e(t)
	for _, np := range []int{2, 3} {
		r := mustTrain(t, np, "bench", "allreduce", "-b", "4", "-e", "1M", "-f", "8", "-n", "3", "-w", "1", "--csv")
		var rows [][]string
		for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, "bytes,") {
				rows = append(rows, strings.Split(l, ","))
			}
		}
		// 4, 32, 256, 2K, 16K, 128K, 1M bytes x ring, mpi, shm (the
		// default adds shm: every rank is on this host)
		if len(rows) != 21 {
			t.Fatalf("np=%d: %d rows:\n%s", np, len(rows), r.stdout)
		}
		for i, row := range rows {
			wantBytes := 4 << (3 * (i / 3))
			algo := []string{"ring", "mpi", "shm"}[i%3]
			busbw, _ := strconv.ParseFloat(row[5], 64)
			if len(row) != 7 || row[0] != strconv.Itoa(wantBytes) || row[2] != algo || row[6] != "0" || !(busbw > 0) {
				t.Errorf("np=%d: row %v, want %d bytes, %s, busbw > 0, 0 wrong", np, row, wantBytes, algo)
			}
		}
		if !strings.Contains(r.stdout, "# memcpy, 1 thread") || !strings.Contains(r.stdout, "# peak resident memory") {
			t.Errorf("np=%d: header or footer missing:\n%s", np, r.stdout)
		}
	}
	bad := trainRun(t, 2, time.Minute, nil, "bench", "allreduce", "-e", "lots")
	if lines := trainLines(bad.stderr); bad.code == 0 || len(lines) != 1 || !strings.Contains(lines[0], `size "lots"`) {
		t.Errorf("bad size: exit %d, %q", bad.code, bad.stderr)
	}
	noTrace(t, bad)
}
