package e2e

import (
	"strings"
	"testing"
)

// TestThreadsSameBits: --threads cuts the work of one rank (the C pool of
// model/par.c: convolutions by parts of the batch, BatchNorm and the
// element-wise passes by rows, matrix products by blocks, Adam's update)
// but never the order of a sum, so a ResNet (with --conv im2col and with
// winograd), a GPT and the MLP end with the same parameters at 1, 2 and 3
// threads, and the log names the thread count.
func TestThreadsSameBits(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	for _, m := range []struct {
		name string
		args []string
	}{
		{"resnet", append(append([]string{}, smallResNet...), "--batch-size", "32", "--max-steps", "6")},
		{"resnet --conv winograd", append(append([]string{}, smallResNet...), "--batch-size", "32", "--max-steps", "6", "--conv", "winograd")},
		{"gpt", append(smallGPT(bytesCorpus(t, dir)), "--max-steps", "6", "--optimizer", "adamw")},
		// The first layer's product, 64 x 784 by 784 x 256, too short to
		// cut by rows: column blocks at 2 and 3 threads (par.c's
		// cols_plan) where the kernels allow.
		{"mlp", []string{"--model", "mlp", "--data", "synthetic", "--synthetic-shape", "1x28x28", "--synthetic-samples", "640", "--batch-size", "64", "--max-steps", "6"}},
	} {
		var want string
		for _, threads := range []string{"1", "2", "3"} {
			r := mustTrain(t, 1, append(append([]string{}, m.args...), "--threads", threads)...)
			if !strings.Contains(r.stdout, threads+" thread(s) per rank") {
				t.Errorf("%s --threads %s: the log does not say so:\n%s", m.name, threads, r.stdout)
			}
			_, _, crc := finalCRC(t, r)
			if want == "" {
				want = crc
			} else if crc != want {
				t.Errorf("%s: parameters crc32c %s at --threads %s, %s at 1", m.name, crc, threads, want)
			}
		}
	}
}
