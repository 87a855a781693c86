package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
	"train/internal/near"
)

// fortunes is a file of Debian's fortunes package, which setup installs:
// about 60 KB of text, enough for short runs.
const fortunes = "/usr/share/games/fortunes/law"

// bytesCorpus tokenizes the fortunes as raw bytes (a vocabulary of 256,
// so a small GPT steps quickly) into dir/law and returns that directory.
func bytesCorpus(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "law")
	if r := trainRun(t, 0, time.Minute, nil, "tokenize", "--bytes", "--val-tokens", "4096", "--out", out, fortunes); r.code != 0 {
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
	// The key bias (the middle third of c_attn.bias) has no gradient in
	// exact arithmetic: q.b_k shifts a row's scores all alike, which
	// softmax ignores. Its gradient is rounding noise, which AdamW
	// rescales, so each run's values are its own noise: they must stay
	// near zero, not agree. Everything else agrees within 1e-5.
	const dim = 32
	for name, w := range one {
		if strings.HasSuffix(name, "attn.c_attn.bias") {
			for _, v := range [][]float32{w[dim : 2*dim], two[name][dim : 2*dim]} {
				for _, x := range v {
					if !(x > -1e-3 && x < 1e-3) {
						t.Errorf("%s: key bias %v, want near 0 (no gradient)", name, x)
					}
				}
			}
			for _, part := range [][2]int{{0, dim}, {2 * dim, 3 * dim}} {
				if err := near.Check(w[part[0]:part[1]], two[name][part[0]:part[1]], 1e-5); err != nil {
					t.Errorf("np=2 batch 2 against np=1 batch 4: %s[%d:%d]: %v", name, part[0], part[1], err)
				}
			}
			delete(one, name)
			delete(two, name)
		}
	}
	sameTensors(t, "np=2 batch 2 against np=1 batch 4", one, two, 1e-5)
	if !strings.Contains(r1.stdout, "val loss") || !strings.Contains(r1.stdout, "perplexity") {
		t.Errorf("no validation loss and perplexity:\n%s", r1.stdout)
	}
	if !resumeIsExact(t, 2, append(smallGPT(filepath.Join(dir, "law")), "--batch-size", "2", "--checkpoint-every", "15")...) {
		t.Error("the resumed GPT run's final checkpoint differs from the uninterrupted run's")
	}
}

// TestGPTBadInput: each mistake is one line naming the option or file.
func TestGPTBadInput(t *testing.T) {
	e2e(t)
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
