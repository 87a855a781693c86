package model

/*
#include "kernels.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"

	"train/openblas"
)

// The rank's compute threads are a pool in C (par.c: why C, and how the
// work is cut so that results do not depend on the thread count). Go
// makes one cgo call per pass.

var threads atomic.Int32

// MaxThreads is the largest pool SetThreads makes (par.c's workers are a
// fixed array).
const MaxThreads = C.MAXT

func init() { threads.Store(1) }

// SetThreads sizes the pool to n threads (the caller's and n-1 workers)
// and returns the size it got; it raises GOMAXPROCS to that plus sparePs
// if lower (sched.go: why).
func SetThreads(n int) int {
	got := int(C.k_set_threads(C.int(max(n, 1))))
	threads.Store(int32(got))
	if runtime.GOMAXPROCS(0) < got+sparePs {
		runtime.GOMAXPROCS(got + sparePs)
	}
	return got
}

// pinLocked: Pin locked the calling goroutine to its OS thread.
var pinLocked bool

// Pin pins the pool's threads one to a CPU of this process's affinity
// when it has exactly one thread per CPU (par.c: k_pin), the calling
// goroutine's OS thread (locked to it: the passes it starts must run on
// that thread) to the first, and otherwise undoes an earlier pinning. Call
// it after SetThreads and SetCPUs, from the goroutine that will run the
// passes. It reports whether the threads are pinned.
func Pin() bool {
	if !pinLocked {
		runtime.LockOSThread()
	}
	on := C.k_pin() != 0
	if !on {
		runtime.UnlockOSThread()
	}
	pinLocked = on
	return on
}

// pinnedCPU is the one CPU thread w of the pool may run on (0: the
// calling thread), -1 where it may run on several (TestPin).
func pinnedCPU(w int) int { return int(C.k_pinned_cpu(C.int(w))) }

// SetCPUs tells the pool how many CPUs its threads share (0: this
// process's affinity, the default) and reports whether it has more
// threads than that: its waiting threads then yield their CPU at every
// turn instead of spinning on it (par.c: oversub).
func SetCPUs(n int) bool { return C.k_set_cpus(C.int(max(n, 0))) != 0 }

// SimulateThreads cuts every pass as for n threads and runs it on the
// caller, each chunk as the thread the pool's schedule gives it, timing
// the pass as n threads would run it (par.c: what that leaves out); n <=
// 1 turns it off, as does SetThreads.
func SimulateThreads(n int) error {
	if C.k_simulate_threads(C.int(n)) != 0 {
		return fmt.Errorf("at most %d threads", MaxThreads)
	}
	return nil
}

// Threads is the pool's size.
func Threads() int { return int(threads.Load()) }

// PoolRanges is par.c's k_pool_ranges, a C function pointer, for other
// packages' C code to run element-wise work as passes of this pool
// (optim.UsePool): float (*)(size_t n, size_t grain, float (*fn)(void *,
// size_t, size_t), void *ctx).
func PoolRanges() unsafe.Pointer { return unsafe.Pointer(C.k_pool_ranges) }

// blasIn is the cblas_sgemm the C code calls (nil: its own plain loop).
var blasIn unsafe.Pointer

// useBLAS points the C code at OpenBLAS once it is loaded.
func useBLAS() {
	if p := openblas.CblasSgemm(); p != blasIn {
		C.k_set_sgemm(p)
		blasIn = p
		C.k_set_gemm_cols(boolInt(colsKeepBits[openblas.Core()]))
	}
}

// colsKeepBits are the OpenBLAS kernel sets whose products give every
// element the bits of one call when cut into column blocks on multiples
// of 64 (par.c's cols_plan), which the C code then may cut products too
// short to share by rows into. Measured on 0.3.21 (Debian 12's) with a
// throwaway harness, 64x256x784, 100x777x300, 90x2000x40 and 12x3000x700
// at 13 cuts: SkylakeX and Cooperlake gave one call's bits at all; Haswell's
// (and Zen's, the same kernels) differed in the 8 columns each side of
// every cut (TestSgemmThreadsSameBits runs both).
var colsKeepBits = map[string]bool{"SkylakeX": true, "Cooperlake": true}

func boolInt(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// withPlainGemm runs f with the C code's own loop (gemm_ref) in place of
// OpenBLAS, as in a process without it (a test's).
func withPlainGemm(f func()) {
	C.k_set_sgemm(nil)
	defer C.k_set_sgemm(blasIn)
	f()
}

// withGemmSpeeds runs f with the products' rows cut as for threads of
// these relative speeds (par.c's cut_rows) instead of the speeds learned,
// for a test; after it, they are learned again from an even cut.
func withGemmSpeeds(speeds []float64, f func()) {
	C.k_gemm_speeds((*C.double)(unsafe.Pointer(unsafe.SliceData(speeds))), C.int(len(speeds)))
	defer C.k_gemm_speeds(nil, 0)
	f()
}

// cutRows is the cut of units blocks into parts, each at least fewest,
// that these speeds give (par.c's cut_rows: part i is blocks
// [at[i], at[i+1])); ok false where it would cut evenly.
func cutRows(speeds []float64, units, parts, fewest int) (at []int, ok bool) {
	c := make([]C.size_t, parts+1)
	var r C.int
	withGemmSpeeds(speeds, func() { r = C.k_cut_rows(C.size_t(units), C.size_t(parts), C.size_t(fewest), &c[0]) })
	if r != 0 {
		return nil, false
	}
	at = make([]int, parts+1)
	for i, v := range c {
		at[i] = int(v)
	}
	return at, true
}

// tileParts is par.c's tile_parts: the row parts of each of blocks
// column blocks at T threads, at most most.
func tileParts(blocks, T, most int) int {
	return int(C.k_tile_parts(C.size_t(blocks), C.size_t(T), C.size_t(most)))
}

// pairUnit is the product a unit of a pass of two products runs (par.c's
// k_sgemm_pair, of xparts parts of the first and yunits units of the
// second): which 0, the first's part i; 1, the second's unit i.
func pairUnit(xparts, yunits, u int) (which, i int) {
	var w C.int
	var ci C.size_t
	C.k_pair_unit(C.size_t(xparts), C.size_t(yunits), C.size_t(u), &w, &ci)
	return int(w), int(ci)
}

// learnCheck is the speeds par.c learns from one pass of a two-part
// product of m rows, whose parts ended t seconds after its start on
// threads who (nil: nothing learned).
func learnCheck(m int, t [2]float64, who [2]int) []float64 {
	var s [2]C.double
	ct := [2]C.double{C.double(t[0]), C.double(t[1])}
	cw := [2]C.int{C.int(who[0]), C.int(who[1])}
	C.k_learn_check(C.size_t(m), &ct[0], &cw[0], &s[0])
	if s[0] == 0 {
		return nil
	}
	return []float64{float64(s[0]), float64(s[1])}
}

// buffersMisaligned is how many of the pool's buffers do not start on a
// cache line (par.c's lines: why they must).
func buffersMisaligned() int { return int(C.k_buffers_misaligned()) }

// wideRuns counts the Winograd passes that ran wide (par.c).
func wideRuns() int { return int(C.k_wino_wide_runs()) }

// ownRuns counts the Winograd passes whose threads made their own
// transformed kernels (par.c's OWN_KERNELS).
func ownRuns() int { return int(C.k_wino_own_runs()) }

// poolCheck runs passes empty passes of up to units units on the pool and
// returns how many units did not run exactly once (par.c's k_pool_check).
func poolCheck(passes, units int, seed uint32) int {
	return int(C.k_pool_check(C.int(passes), C.int(units), C.uint(seed)))
}

// winoMul and winoDWMul run winograd.c's products for a test: P points'
// m = v u (k_wino_mul) and d = mt^T v (k_wino_dw_mul; added to d when add), T tiles whose rows
// of v and m (mt) are ldv and ldm floats apart, point j's at j*c (v) and
// j*o (m), and its kernels (u, d) at j*winoLd(c, o).
func winoMul(m []float32, ldm int, v []float32, ldv int, u []float32, t, c, o, p int) {
	C.k_wino_mul(f32(m), C.size_t(ldm), f32(v), C.size_t(ldv), f32(u), C.size_t(t), C.size_t(c), C.size_t(o),
		C.size_t(p))
}

func winoDWMul(d, mt []float32, ldm int, v []float32, ldv, t, c, o, p int, add bool) {
	a := C.int(0)
	if add {
		a = 1
	}
	C.k_wino_dw_mul(f32(d), f32(mt), C.size_t(ldm), f32(v), C.size_t(ldv), C.size_t(t), C.size_t(c), C.size_t(o),
		C.size_t(p), a)
}

// winoLd is the floats from one point's c x o transformed kernels to the
// next (k_wino_ld).
func winoLd(c, o int) int { return int(C.k_wino_ld(C.size_t(c), C.size_t(o))) }

// winoOwnDW reports whether winoDWMul's c x o sums are winograd.c's own
// (k_wino_own_dw), whose adding calls continue one call's chains.
func winoOwnDW(c, o int) bool { return C.k_wino_own_dw(C.size_t(c), C.size_t(o)) != 0 }

// winoLevel caps winograd.c's code level at most (4 AVX-512, 3 AVX2, 0
// the x86-64 baseline: pointer transforms and OpenBLAS's products; 4 is
// the CPU's own choice) and returns the CPU's own level.
func winoLevel(most int) int {
	return int(C.k_wino_level(C.int(most)))
}

// wkCut is the blocks (outputs by inputs) a layer's kernels' transforms
// are cut into for o outputs and c inputs at t threads, their writes
// running along the inputs when alongInputs (par.c's k_wk_cut).
func wkCut(o, c int, alongInputs bool, t int) (bo, bc int) {
	a := C.int(0)
	if alongInputs {
		a = 1
	}
	var x, y C.size_t
	C.k_wk_cut(C.size_t(o), C.size_t(c), a, C.int(t), &x, &y)
	return int(x), int(y)
}

// spinPass runs one real pass of units units on the pool, unit u spinning
// (1 + u%3) * us microseconds (par.c's k_spin_pass).
func spinPass(units int, us float64) { C.k_spin_pass(C.int(units), C.double(us)) }

// stealRead turns off (false) and on the pool's read of another thread's
// share before taking from it (par.c's take), for BenchmarkPass's A/B.
func stealRead(on bool) {
	v := 0
	if on {
		v = 1
	}
	C.k_steal_read(C.int(v))
}

// simCheck runs one simulated pass of units units on t threads, unit u
// spinning (1 + u%3) * us microseconds (par.c's k_sim_check): how many
// times each unit ran, which simulated thread ran it, the longest unit,
// and the pass's time on this thread and at t threads, in seconds.
func simCheck(units, t int, us float64) (runs, who []int32, longest, serial, span float64) {
	runs, who = make([]int32, units), make([]int32, units)
	var l, s, p C.double
	C.k_sim_check(C.int(units), C.int(t), C.double(us), (*C.int)(unsafe.Pointer(&runs[0])), (*C.int)(unsafe.Pointer(&who[0])), &l, &s, &p)
	return runs, who, float64(l), float64(s), float64(p)
}
