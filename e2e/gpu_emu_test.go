package e2e

import (
	"strings"
	"testing"

	"train/gpu/emu"
)

// TestGPTOnEmulatedGPU runs `train --device cuda --model gpt` end to end
// on the CPU emulator of the CUDA libraries (gpu/emu): the GPU path's
// executor, its kernels compiled from the binary's own source, cuBLAS as
// plain loops. It is not the GPU check (scripts/gpu-check.sh runs on an
// H100), but it runs everywhere: on the CPU path's tokens, ten steps of
// SGD with momentum end within 1e-5 of the CPU path's parameters (AdamW
// would amplify the two paths' different roundings, as it does between
// the CPU path's own runs: TestGPTDataParallel), and np=2 sharing the
// "GPU", its ring over pinned host buffers and MPI, ends where np=1 does
// with AdamW, every rank alike.
func TestGPTOnEmulatedGPU(t *testing.T) {
	e2e(t)
	alongside(t)
	dir := t.TempDir()
	lib, err := emu.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	// 512 validation tokens, not 4,096: the emulator's evaluation of
	// 128 windows took 3.5 of a 5.8 s job, and the runs are compared by
	// their parameters.
	data := bytesCorpusVal(t, dir, 512)
	base := []string{"--model", "gpt", "--layers", "2", "--heads", "2", "--dim", "32", "--context", "32", "--data", data,
		"--warmup-steps", "5", "--log-every", "5", "--eval-batch", "32", "--max-steps", "10"}
	gpu := append([]string{"--device", "cuda"}, emu.Args(lib)...)
	sgd := append(append([]string{}, base...), "--optimizer", "sgd", "--momentum", "0.9", "--lr", "0.1", "--batch-size", "4")
	r, onGPU := trainAt(t, 1, 1, dir, "gpu-sgd", 10, append(sgd, gpu...)...)
	if !strings.Contains(r.stdout, "CPU emulator") {
		t.Fatalf("the run did not open the emulator:\n%s", r.stdout)
	}
	_, onCPU := trainAt(t, 1, 1, dir, "cpu-sgd", 10, sgd...)
	sameTensors(t, "GPU (emulated) against CPU, SGD", onCPU, onGPU, 1e-5)

	adamw := append(append([]string{}, base...), "--optimizer", "adamw", "--lr", "3e-3", "--weight-decay", "0.1")
	_, one := trainAt(t, 1, 1, dir, "gpu-np1", 10, append(append(adamw, "--batch-size", "4"), gpu...)...)
	_, two := trainAt(t, 2, 2, dir, "gpu-np2", 10, append(append(adamw, "--batch-size", "2", "--gpu-ring", "host"), gpu...)...)
	gptSame(t, "np=2 batch 2 against np=1 batch 4, both on the emulated GPU", one, two, 32)
}
