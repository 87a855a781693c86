package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cpuFlags are the flags /proc/cpuinfo gives this machine's first CPU.
func cpuFlags(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Fatalf("reading the CPU's flags: %v", err)
	}
	flags := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "flags" {
			for _, f := range strings.Fields(v) {
				flags[f] = true
			}
			break
		}
	}
	return flags
}

// TestGemmAMX: --gemm amx (model/gemm_amx.c). Where /proc/cpuinfo lists
// no amx_tile and amx_bf16, the option is refused in one line that names
// it; where it lists them and Linux refuses the tile state (before 5.16,
// or a sandbox filtering arch_prctl), the test skips, saying so. Where
// AMX runs: the log says the products use AMX; a ResNet (both
// --conv algorithms) and a GPT end with the same parameters at 1, 2 and 3
// threads (AMX's sums are cut by the shape alone, like OpenBLAS's); and
// the GPT trained 30 steps on 2 ranks with AMX ends within 1e-5 of the
// same run on OpenBLAS (a float32 product's accuracy on both: six bf16
// products whose dropped terms are below 2^-24), and PyTorch, loading its
// checkpoint, gets its validation loss within 1e-4 (float64, strict
// load).
func TestGemmAMX(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	data := bytesCorpus(t, dir)
	flags := cpuFlags(t)
	if !flags["amx_tile"] || !flags["amx_bf16"] {
		gemmRefused(t, data, "amx", "--gemm amx: this CPU has no AMX-BF16")
		t.Logf("no amx_tile and amx_bf16 in /proc/cpuinfo: checked the refusal only")
		return
	}
	// The CPU has it; Linux before 5.16, or a sandbox that filters
	// arch_prctl, may still refuse the tile state: then it says so.
	if r := trainRun(t, 0, time.Minute, nil, append(smallGPT(data), "--max-steps", "1", "--gemm", "amx")...); r.code != 0 {
		lines := trainLines(r.stderr)
		if len(lines) == 1 && strings.Contains(lines[0], "--gemm amx: Linux refused the AMX tile state") {
			noTrace(t, r)
			t.Skipf("the CPU has AMX but this kernel or sandbox refuses its state: %s", lines[0])
		}
		t.Fatalf("--gemm amx on an AMX CPU: exit %d\n%s", r.code, r.stderr)
	}
	checkGemmPath(t, dir, data, "amx", "products: AMX")
}

// gemmRefused: --gemm gemm on a CPU without it exits non-zero with one
// line saying want, and no Go trace.
func gemmRefused(t *testing.T, data, gemm, want string) {
	t.Helper()
	r := trainRun(t, 0, time.Minute, nil, append(smallGPT(data), "--max-steps", "1", "--gemm", gemm)...)
	lines := trainLines(r.stderr)
	if r.code == 0 || len(lines) != 1 || !strings.Contains(lines[0], want) {
		t.Errorf("--gemm %s where the CPU lacks it: exit %d, lines %q", gemm, r.code, lines)
	}
	noTrace(t, r)
}

// checkGemmPath runs --gemm gemm where it is available: the log says so
// (marker); a ResNet (both --conv algorithms) and a GPT end with the same
// parameters at 1, 2 and 3 threads (the path's sums are cut by the shape
// alone, like OpenBLAS's); the GPT trained 30 steps on 2 ranks ends within
// 1e-5 of the same run on OpenBLAS (float32 products both, their sums in
// other orders), and PyTorch, loading its checkpoint, gets its
// validation loss within 1e-4 (float64, strict load).
func checkGemmPath(t *testing.T, dir, data, gemm, marker string) {
	t.Helper()
	for _, m := range []struct {
		name string
		args []string
	}{
		{"resnet", append(append([]string{}, smallResNet...), "--batch-size", "32", "--max-steps", "4")},
		{"resnet --conv winograd", append(append([]string{}, smallResNet...), "--batch-size", "32", "--max-steps", "4", "--conv", "winograd")},
		{"gpt", append(smallGPT(data), "--max-steps", "6")},
	} {
		var want string
		for _, threads := range []string{"1", "2", "3"} {
			r := mustTrain(t, 1, append(append([]string{}, m.args...), "--threads", threads, "--gemm", gemm)...)
			if !strings.Contains(r.stdout, marker) {
				t.Errorf("%s --gemm %s: the log does not say so:\n%s", m.name, gemm, r.stdout)
			}
			_, _, crc := finalCRC(t, r)
			if want == "" {
				want = crc
			} else if crc != want {
				t.Errorf("%s --gemm %s: parameters crc32c %s at --threads %s, %s at 1", m.name, gemm, crc, threads, want)
			}
		}
	}
	args := append(smallGPT(data), "--max-steps", "30", "--batch-size", "2")
	_, blas := trainAt(t, 2, 2, dir, "blas", 30, args...)
	log := filepath.Join(dir, gemm+".jsonl")
	_, got := trainAt(t, 2, 2, dir, gemm, 30, append(args, "--gemm", gemm, "--log-file", log)...)
	gptSame(t, "--gemm "+gemm+" against blas after 30 steps", blas, got, 32)
	step, ours, theirs := torchValLoss(t, filepath.Join(dir, gemm), log, data)
	t.Logf("--gemm %s: val loss at step %d: train %.6f, PyTorch (float64) %.6f", gemm, step, ours, theirs)
}
