package e2e

import "testing"

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
		gemmRefused(t, data, "avx512", "--gemm avx512: this CPU has no AVX-512F")
		t.Logf("no avx512f in /proc/cpuinfo: checked the refusal only")
		return
	}
	checkGemmPath(t, dir, data, "avx512", "products: our own AVX-512 SGEMM")
}
