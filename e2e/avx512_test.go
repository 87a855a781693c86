package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestGemmAVX512: --gemm avx512 (model/gemm_avx512.c). Where
// /proc/cpuinfo lists no avx512f, the option is refused in one line that
// names it. Where it runs: checkGemmPath (the log, the same parameters at
// 1, 2 and 3 threads, the GPT at np=2 within 1e-5 of OpenBLAS's run after
// 30 steps, PyTorch's validation loss of its checkpoint).
func TestGemmAVX512(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	data := bytesCorpus(t, dir)
	if !cpuFlags(t)["avx512f"] {
		r := trainRun(t, 0, time.Minute, nil, append(smallGPT(data), "--max-steps", "1", "--gemm", "avx512")...)
		lines := trainLines(r.stderr)
		if r.code == 0 || len(lines) != 1 || !strings.Contains(lines[0], "--gemm avx512: this CPU has no AVX-512F") {
			t.Errorf("--gemm avx512 without AVX-512: exit %d, lines %q", r.code, lines)
		}
		noTrace(t, r)
		t.Logf("no avx512f in /proc/cpuinfo: checked the refusal only")
		return
	}
	checkGemmPath(t, dir, data, "avx512", "products: our own AVX-512 SGEMM")
}
