// Why --gemm amx's speed swings on this project's Emerald Rapids VM, and
// whether it does on another machine: AMX's rate on real data, round by
// round, beside the FMA units' in the same round. Each round runs, for
// about 10 ms each, on one thread:
//
//   zero     TDPBF16PS on 6 accumulator tiles, operands in registers, all
//            zeros (a unit fed zeros swings least)
//   probe    the same on tiles of bf16 values in [-1, 1)
//   chain4   the same on 4 accumulators, as model/gemm_amx.c's kernel
//            keeps (tiles 0-3 a 32 x 32 block of C, 4-7 its operands)
//   kernel   gemm_amx.c's kernel itself (the file is included below): a
//            32 x 32 block over 12 blocks of k (KC 384), the six products
//            of the bf16 pieces, its 18 tile loads a block of k, over a
//            panel of packed B held in L2 (PANEL column pairs of 72 KB,
//            default 8)
//   k1x5     an alternative tried: 5 accumulators (a 16 x 80 block), one
//            A tile, B's tiles double-buffered in two (five chains, one
//            load a product)
//   fma12    12 independent chains of AVX-512 FMAs: the FMA units' peak,
//            which OpenBLAS's SGEMM runs on (float32 GFLOP/s)
//
// The kernel's float32 rate is its bf16 rate over 6.
//
//   gcc -O2 -march=sapphirerapids scripts/bench/amx-swing.c -o /tmp/amx-swing
//   /tmp/amx-swing [ROUNDS [PANEL]]
//
// On the 2-vCPU Emerald Rapids VM (family 6 model 207; 43rd session, 40
// rounds, fma12 as mended below): fma12 140 to 178 GFLOP/s (the core's
// peak: 172 to 176 by scripts/bench/machine-probe.sh); AMX on data in two
// states that change within a second: in 22 fast rounds the kernel 1,535
// to 2,227 GFLOP/s of bf16 (255 to 370 float32 GFLOP/s: 1.45 to 2.1x the
// FMA peak), mostly 0.85 to 1.0 of chain4; in the 18 others 586 to 706
// (98 to 118 float32: 0.55 to 0.67 of it), with chain4 and the probe
// about halved too. fma12 averaged 156 in the slow rounds and 171 in the
// fast: the FMA units dip a tenth while AMX halves. Zeros 1,547 to
// 2,611. k1x5 is slower in both states. So the swing is the AMX unit's,
// on data: not the kernel's loads or its four chains. (The 40th to 42nd
// sessions' fma12 figures, 225 to 290, came from the unmended fma12.)

// model/gemm_amx.c itself, for its kernel (static there), with the two
// pool calls it makes stubbed: one thread.
#include "../../model/gemm_amx.c"
void k_run(size_t units, k_task fn, void *ctx) { fn(ctx, 0, units, 0); }
int k_pool_size(void) { return 1; }

#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define KB (KC / 32) // blocks of 32 k in a chunk
#define NOINLINE __attribute__((noinline))

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

// Each returns the TDPBF16PS it issued.
NOINLINE static double probe(long n) {
	for (long i = 0; i < n; i++) {
		_tile_dpbf16ps(0, 6, 7);
		_tile_dpbf16ps(1, 6, 7);
		_tile_dpbf16ps(2, 6, 7);
		_tile_dpbf16ps(3, 6, 7);
		_tile_dpbf16ps(4, 6, 7);
		_tile_dpbf16ps(5, 6, 7);
	}
	return 6.0 * n;
}

#define DP4()                    \
	_tile_dpbf16ps(0, 4, 6); \
	_tile_dpbf16ps(1, 4, 7); \
	_tile_dpbf16ps(2, 5, 6); \
	_tile_dpbf16ps(3, 5, 7)

NOINLINE static double chain4(long n) {
	for (long i = 0; i < n; i++) {
		DP4();
		DP4();
		DP4();
		__asm__ volatile("");
	}
	return 12.0 * n;
}

#include "fma12.h"

// k1x5: a 16 x 80 block; A's piece p at A + p*kb*TILE, B's column tile j
// of piece q at B + (q*5 + j)*kb*TILE.
#define B5(q, j) (B + ((q) * 5 + (j)) * kb * TILE + o)
#define ROW5(q)                          \
	_tile_loadd(6, B5(q, 0), 64);    \
	_tile_dpbf16ps(0, 5, 6);         \
	_tile_loadd(7, B5(q, 1), 64);    \
	_tile_dpbf16ps(1, 5, 7);         \
	_tile_loadd(6, B5(q, 2), 64);    \
	_tile_dpbf16ps(2, 5, 6);         \
	_tile_loadd(7, B5(q, 3), 64);    \
	_tile_dpbf16ps(3, 5, 7);         \
	_tile_loadd(6, B5(q, 4), 64);    \
	_tile_dpbf16ps(4, 5, 6);
NOINLINE static void k1x5(float *t, const uint16_t *A, const uint16_t *B, size_t kb) {
	_tile_zero(0);
	_tile_zero(1);
	_tile_zero(2);
	_tile_zero(3);
	_tile_zero(4);
	for (size_t k = 0; k < kb; k++) {
		size_t o = k * TILE;
		_tile_loadd(5, A + o, 64);
		ROW5(0) ROW5(1) ROW5(2)
		_tile_loadd(5, A + kb * TILE + o, 64);
		ROW5(1) ROW5(0)
		_tile_loadd(5, A + 2 * kb * TILE + o, 64);
		ROW5(0)
	}
	_tile_stored(0, t, 320);
	_tile_stored(1, t + 16, 320);
	_tile_stored(2, t + 32, 320);
	_tile_stored(3, t + 48, 320);
	_tile_stored(4, t + 64, 320);
}

// rnd: a bf16 in [-1, 1) from the top bits of x.
static uint16_t rnd(uint32_t x) {
	float f = (float)(x >> 8) / (float)(1 << 23) - 1.0f;
	uint32_t u;
	memcpy(&u, &f, 4);
	return (uint16_t)(u >> 16);
}

int main(int argc, char **argv) {
	int rounds = argc > 1 ? atoi(argv[1]) : 12;
	size_t panel = argc > 2 ? (size_t)atoi(argv[2]) : 8;
	int e = k_amx_enable(1);
	if (e) {
		fprintf(stderr, "amx-swing: %s\n",
		        e == 1 ? "this CPU has no AMX-BF16" : "Linux refused the AMX tile state (a kernel before 5.16?)");
		return 1;
	}
	size_t pa = 2 * KB * TILE, pb = 2 * KB * TILE, bsize = 3 * pb * (panel + 3);
	uint16_t *A = aligned_alloc(64, 3 * pa * 2), *B = aligned_alloc(64, bsize * 2);
	static float t[2048] __attribute__((aligned(64)));
	if (!A || !B) return 1;
	// bf16 of uniform values in [-1, 1): AMX's rate depends on the data
	// (tiles of zeros run faster), so every loop reads values like a
	// product's.
	uint32_t x = 1;
	for (size_t i = 0; i < 3 * pa; i++) x = x * 1664525 + 1013904223, A[i] = rnd(x);
	for (size_t i = 0; i < bsize; i++) x = x * 1664525 + 1013904223, B[i] = rnd(x);
	tiles_on();
	_tile_zero(6);
	_tile_zero(7);
	const double per = 16.0 * 16 * 32 * 2; // FLOP a TDPBF16PS
	printf("bf16 GFLOP/s; round: probe on zero tiles, probe, chain4, kernel, k1x5; float32 GFLOP/s: fma12\n");
	double lo[6], hi[6];
	for (int r = 0; r < rounds; r++) {
		double g[6];
		tiles_on();
		_tile_zero(6);
		_tile_zero(7);
		double t0 = now(), n = probe(7500);
		g[0] = n * per / (now() - t0) / 1e9;
		_tile_loadd(6, A, 64);
		_tile_loadd(7, B, 64);
		t0 = now(), n = probe(7500);
		g[1] = n * per / (now() - t0) / 1e9;
		t0 = now(), n = chain4(3750);
		g[2] = n * per / (now() - t0) / 1e9;
		t0 = now();
		for (int i = 0; i < 80; i++)
			for (size_t j = 0; j < panel; j++) kernel(t, A, pa, B + j * 3 * pb, pb, KB);
		g[3] = 80.0 * panel * 24 * KB * per / (now() - t0) / 1e9;
		t0 = now();
		for (int i = 0; i < 80; i++)
			for (size_t j = 0; j < panel; j++) k1x5(t, A, B + j * 3 * pb, KB);
		g[4] = 80.0 * panel * 30 * KB * per / (now() - t0) / 1e9;
		t0 = now(), n = fma12(2000000);
		g[5] = n / (now() - t0) / 1e9;
		printf("%5d %8.0f %8.0f %8.0f %8.0f %8.0f %8.0f\n", r + 1, g[0], g[1], g[2], g[3], g[4], g[5]);
		for (int i = 0; i < 6; i++) {
			if (!r || g[i] < lo[i]) lo[i] = g[i];
			if (!r || g[i] > hi[i]) hi[i] = g[i];
		}
		usleep(300000);
	}
	printf("range");
	for (int i = 0; i < 6; i++) printf("  %.0f-%.0f", lo[i], hi[i]);
	printf("\n");
	_tile_release();
	return 0;
}
