package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"train/internal/near"
	"train/runlog"
)

// fortunes is a file of Debian's fortunes package, which setup installs:
// about 60 KB of text, enough for short runs.
const fortunes = "/usr/share/games/fortunes/law"

// bytesCorpus tokenizes the fortunes as raw bytes (a vocabulary of 256,
// so a small GPT steps quickly) into dir/law and returns that directory:
// 4096 validation tokens, 127 windows of 32.
func bytesCorpus(t *testing.T, dir string) string {
	t.Helper()
	return bytesCorpusVal(t, dir, 4096)
}

// bytesCorpusVal is bytesCorpus with val validation tokens, into
// dir/law-val: fewer where the evaluation is slow and not the point
// (the emulated GPU; ZeRO stage 3 gathers every layer for each
// evaluation batch).
func bytesCorpusVal(t *testing.T, dir string, val int) string {
	t.Helper()
	out := filepath.Join(dir, "law")
	if val != 4096 {
		out += fmt.Sprintf("-val%d", val)
	}
	if r := trainRun(t, 0, time.Minute, nil, "tokenize", "--bytes", "--val-tokens", fmt.Sprint(val), "--out", out, fortunes); r.code != 0 {
		t.Fatalf("tokenize: %s", r.stderr)
	}
	return out
}

// smallGPT are the options of a 2-layer GPT on the byte corpus.
func smallGPT(data string) []string {
	return []string{"--model", "gpt", "--layers", "2", "--heads", "2", "--dim", "32", "--context", "32", "--data", data,
		"--optimizer", "adamw", "--lr", "3e-3", "--weight-decay", "0.1", "--warmup-steps", "5", "--log-every", "10", "--eval-batch", "32"}
}

// TestGPTDataParallel: the GPT under data parallelism. np=2 with 2
// windows per rank reaches the parameters (and AdamW's moments) of np=1
// with 4, within 1e-5 after 30 steps (the sampler draws the same global
// batches whatever np is); every rank ends identical; the loss falls; a
// run stopped at 15 and resumed ends with the same bytes as one that was
// not.
func TestGPTDataParallel(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	args := append(smallGPT(bytesCorpus(t, dir)), "--max-steps", "30")
	r1, one := trainAt(t, 1, 1, dir, "np1", 30, append(args, "--batch-size", "4")...)
	_, two := trainAt(t, 2, 2, dir, "np2", 30, append(args, "--batch-size", "2")...)
	gptSame(t, "np=2 batch 2 against np=1 batch 4", one, two, 32)
	if !strings.Contains(r1.stdout, "val loss") || !strings.Contains(r1.stdout, "perplexity") {
		t.Errorf("no validation loss and perplexity:\n%s", r1.stdout)
	}
	if !resumeIsExact(t, 2, append(smallGPT(filepath.Join(dir, "law")), "--batch-size", "2", "--checkpoint-every", "15")...) {
		t.Error("the resumed GPT run's final checkpoint differs from the uninterrupted run's")
	}
}

// gptSame compares two GPTs' tensors within 1e-5, except the attention's
// key bias (the middle third of c_attn.bias, dim values), which has no
// gradient in exact arithmetic: q.b_k shifts a row's scores all alike,
// which softmax ignores. Its gradient is rounding noise, which AdamW
// rescales, so each run's values are its own noise: they must stay near
// zero, not agree.
func gptSame(t *testing.T, what string, a, b map[string][]float32, dim int) {
	t.Helper()
	a, b = maps.Clone(a), maps.Clone(b)
	for name, w := range a {
		if !strings.HasSuffix(name, "attn.c_attn.bias") {
			continue
		}
		for _, v := range [][]float32{w[dim : 2*dim], b[name][dim : 2*dim]} {
			for _, x := range v {
				if !(x > -1e-3 && x < 1e-3) {
					t.Errorf("%s: %s: key bias %v, want near 0 (no gradient)", what, name, x)
				}
			}
		}
		for _, part := range [][2]int{{0, dim}, {2 * dim, 3 * dim}} {
			if err := near.Check(w[part[0]:part[1]], b[name][part[0]:part[1]], 1e-5); err != nil {
				t.Errorf("%s: %s[%d:%d]: %v", what, name, part[0], part[1], err)
			}
		}
		delete(a, name)
		delete(b, name)
	}
	sameTensors(t, what, a, b, 1e-5)
}

// TestGPTStrategies: the GPT under the other strategies and allreduce
// algorithms. Synchronous parameter servers (two, so the shards cut the
// flat buffer where decayed and undecayed tensors meet) and the mpi and
// hier allreduces reach the ring's parameters within 1e-5 after 20 AdamW
// steps with weight decay; local SGD, asynchronous servers and bf16
// compression train to the end with every rank's replica as it should be.
func TestGPTStrategies(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	args := append(smallGPT(bytesCorpus(t, dir)), "--batch-size", "2", "--max-steps", "20")
	_, ref := trainAt(t, 2, 2, dir, "ring", 20, args...)
	for _, tc := range []struct {
		name string
		np   int
		args []string
	}{
		{"ps-sync", 4, []string{"--strategy", "ps-sync", "--servers", "2"}},
		{"mpi", 2, []string{"--allreduce", "mpi"}},
		{"hier", 2, []string{"--allreduce", "hier"}},
	} {
		_, got := trainAt(t, tc.np, 2, dir, tc.name, 20, append(args, tc.args...)...)
		gptSame(t, tc.name+" against ring", ref, got, 32)
	}
	for _, tc := range []struct {
		name string
		np   int
		args []string
	}{
		{"local-sgd", 2, []string{"--strategy", "local-sgd", "--sync-every", "4"}},
		{"ps-async", 3, []string{"--strategy", "ps-async", "--servers", "1"}},
		{"bf16", 2, []string{"--compress", "bf16"}},
	} {
		r := trainRun(t, tc.np, 2*time.Minute, nil, append(args, tc.args...)...)
		if r.code != 0 || !strings.Contains(r.stdout, "val loss") {
			t.Errorf("%s: exit %d\n%s\n%s", tc.name, r.code, r.stdout, r.stderr)
		}
	}
}

// TestGPTBadInput: each mistake is one line naming the option or file.
func TestGPTBadInput(t *testing.T) {
	e2e(t)
	alongside(t)
	dir := t.TempDir()
	data := bytesCorpus(t, dir)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"heads not dividing dim", []string{"--heads", "3"}, "--heads 3 does not divide --dim 32"},
		{"context longer than the data", []string{"--context", "5000"}, "--context 5000: longer than the data"},
		{"a token at or above the vocabulary", []string{"--vocab", "100"}, "law_train_000000.bin: token"},
		{"synthetic data", []string{"--data", "synthetic"}, "make them with train tokenize"},
		{"no shards", []string{"--data", dir}, "no train shards"},
		{"--depth with gpt", []string{"--depth", "20"}, "--depth 20 is not used with --model gpt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append(smallGPT(data), tc.args...), "--max-steps", "2")
			r := trainRun(t, 2, time.Minute, nil, args...)
			lines := trainLines(r.stderr)
			if r.code == 0 || len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
				t.Errorf("exit %d, train's lines %q: want one line with %q", r.code, lines, tc.want)
			}
			noTrace(t, r)
		})
	}
}

// lastEval is the test (validation) loss of the log's last evaluation,
// and its step.
func lastEval(t *testing.T, log string) (int, float64) {
	t.Helper()
	recs, err := runlog.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(recs) - 1; i >= 0; i-- {
		if r := recs[i]; (r.Type == "epoch" || r.Type == "eval") && r.TestLoss != nil {
			return r.Step, *r.TestLoss
		}
	}
	t.Fatalf("%s: no evaluation record", log)
	return 0, 0
}

// torchValLoss: PyTorch (scripts/torch_gpt.py, float64, strict load)
// evaluates the checkpoint in ck of the run's last evaluation in log, on
// data, and must get its validation loss within 1e-4; it returns the
// step and both losses.
func torchValLoss(t *testing.T, ck, log, data string) (step int, ours, theirs float64) {
	t.Helper()
	step, ours = lastEval(t, log)
	path := filepath.Join(ck, fmt.Sprintf("step-%08d.safetensors", step))
	out, err := exec.Command("/usr/bin/python3", "scripts/torch_gpt.py", "eval", path, data).CombinedOutput()
	if err != nil {
		t.Fatalf("torch_gpt.py eval: %v\n%s(install python3-torch with scripts/setup.sh --test)", err, out)
	}
	var got struct {
		Step    int
		ValLoss float64 `json:"val_loss"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("torch_gpt.py printed %q: %v", out, err)
	}
	if got.Step != step || !near.Close(ours, got.ValLoss, 0, 1e-4) {
		t.Errorf("PyTorch: step %d val loss %.6f; train: step %d val loss %.6f", got.Step, got.ValLoss, step, ours)
	}
	return step, ours, got.ValLoss
}

// TestGPTInPyTorch: PyTorch loads a trained GPT checkpoint into the
// README's module (scripts/torch_gpt.py) with load_state_dict(strict=True),
// lm_head.weight included, and gets our validation loss within 1e-4.
// The same run checks --lr-decay-steps (the rate reaches zero there and
// stays) and --eval-every (a validation record every 10 steps). Then
// --init-from that checkpoint starts a run from its weights (a step at a
// rate of nearly zero keeps its validation loss), and --init-from a file
// for another vocabulary is refused in one line.
func TestGPTInPyTorch(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	data := bytesCorpus(t, dir)
	ck, log := filepath.Join(dir, "ck"), filepath.Join(dir, "run.jsonl")
	mustTrain(t, 2, append(smallGPT(data), "--batch-size", "4", "--max-steps", "40", "--lr-decay-steps", "30", "--eval-every", "10",
		"--checkpoint-dir", ck, "--log-file", log)...)
	step, ours, theirs := torchValLoss(t, ck, log, data)
	path := filepath.Join(ck, fmt.Sprintf("step-%08d.safetensors", step))
	t.Logf("val loss at step %d: train %.6f, PyTorch (float64, strict load) %.6f", step, ours, theirs)

	recs, err := runlog.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	evals := 0
	for _, r := range recs {
		switch {
		case r.Type == "eval":
			evals++
		case r.Type == "step" && r.LR != nil:
			// The rate of step s (s-1 steps done): warm-up over 5, then
			// 0.5 (1 + cos(pi t)) with t = (s-1-5)/(30-5), 0 from step 31.
			tt := math.Min(1, float64(r.Step-1-5)/25)
			want := 3e-3 * 0.5 * (1 + math.Cos(math.Pi*tt))
			if !near.Close(want, *r.LR, 1e-9, 1e-15) {
				t.Errorf("step %d: lr %v, want %v (cosine to zero at --lr-decay-steps 30)", r.Step, *r.LR, want)
			}
		}
	}
	if evals != 3 { // steps 10, 20, 30; 40 is the run's end, evaluated anyway
		t.Errorf("%d eval records, want 3 (--eval-every 10 over 40 steps)", evals)
	}

	log2 := filepath.Join(dir, "init.jsonl")
	r := mustTrain(t, 2, append(smallGPT(data), "--batch-size", "4", "--max-steps", "1", "--lr", "1e-12", "--init-from", path, "--log-file", log2)...)
	if !strings.Contains(r.stdout, "init: weights from "+path) {
		t.Errorf("no init line:\n%s", r.stdout)
	}
	if _, v := lastEval(t, log2); !near.Close(ours, v, 0, 1e-4) {
		t.Errorf("after --init-from %s and a step at lr 1e-12: val loss %v, want the checkpoint's %v", path, v, ours)
	}
	bad := trainRun(t, 2, time.Minute, nil, append(smallGPT(data), "--max-steps", "1", "--dim", "16", "--context", "16",
		"--init-from", "testdata/reference/gpt-hf.safetensors")...)
	lines := trainLines(bad.stderr)
	if bad.code == 0 || len(lines) != 1 || !strings.Contains(lines[0], "--init-from testdata/reference/gpt-hf.safetensors: its token embedding has 61 rows, and the data's vocabulary is 256") {
		t.Errorf("vocabulary mismatch: exit %d, lines %q", bad.code, lines)
	}
	noTrace(t, bad)
}

// TestGPTGenerate: train generate from a byte-level GPT's checkpoint
// directory: exactly --tokens tokens (bytes here) after the prompt, also
// past the context (the window slides); the same seed gives the same text
// and temperature 0 the same text whatever the seed; bad input is one line.
func TestGPTGenerate(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck")
	mustTrain(t, 2, append(smallGPT(bytesCorpus(t, dir)), "--batch-size", "4", "--max-steps", "20", "--checkpoint-dir", ck)...)
	gen := func(args ...string) (string, result) {
		r := trainRun(t, 0, time.Minute, nil, append([]string{"generate", "--checkpoint", ck, "--prompt", "The law"}, args...)...)
		return r.stdout, r
	}
	a, r := gen("--tokens", "80", "--seed", "7")
	// The text, and a newline after it unless it ends with one.
	if n := len("The law") + 80; r.code != 0 || !strings.HasPrefix(a, "The law") || !(len(a) == n+1 || len(a) == n && strings.HasSuffix(a, "\n")) {
		t.Fatalf("exit %d, %d bytes of output (want the prompt and 80 bytes, past the context of 32): %q\n%s", r.code, len(a), a, r.stderr)
	}
	if b, _ := gen("--tokens", "80", "--seed", "7"); b != a {
		t.Errorf("the same seed gave another text:\n%q\n%q", a, b)
	}
	if b, _ := gen("--tokens", "80", "--seed", "8"); b == a {
		t.Errorf("seeds 7 and 8 gave the same text %q", a)
	}
	g1, _ := gen("--tokens", "40", "--temperature", "0", "--seed", "1")
	g2, _ := gen("--tokens", "40", "--temperature", "0", "--seed", "2")
	if g1 != g2 {
		t.Errorf("greedy decoding depends on the seed:\n%q\n%q", g1, g2)
	}
	t.Logf("sample after 20 steps: %q", a)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"generate", "--checkpoint", filepath.Join(dir, "none"), "--prompt", "x"}, "--checkpoint: stat"},
		{[]string{"generate", "--checkpoint", dir, "--prompt", "x"}, "no step-*.safetensors checkpoint"},
		{[]string{"generate", "--checkpoint", ck, "--prompt", "", "--tokens", "5"}, "--prompt is empty and the bytes vocabulary has no start token"},
		{[]string{"generate", "--checkpoint", ck, "--prompt", "x", "--tokenizer", "gpt2"}, "--tokenizer gpt2 has 50257 tokens, the model"},
		{[]string{"generate", "--checkpoint", ck, "--prompt", "x", "--top-k", "-1"}, "none may be negative"},
	} {
		r := trainRun(t, 0, time.Minute, nil, tc.args...)
		lines := trainLines(r.stderr)
		if r.code == 0 || len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
			t.Errorf("%q: exit %d, lines %q: want one line with %q", tc.args, r.code, lines, tc.want)
		}
		noTrace(t, r)
	}
}
