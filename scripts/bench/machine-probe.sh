#!/usr/bin/env bash
# What this machine charges for the things a training step does besides
# arithmetic, measured in C so that no runtime of ours is in the way:
#
# - SGEMM (one thread) on each OpenBLAS kernel set this CPU can run, and on
#   the one OpenBLAS picks itself, at 1024^3 and at a Winograd product's
#   196x16x16: OPENBLAS_CORETYPE decides which kernels run;
# - a page fault: the first touch of each 4 KiB page of a fresh 256 MiB
#   mapping, and the same with MADV_HUGEPAGE (what a process pays when its
#   allocator hands memory back to the kernel and takes it again);
# - a system call: FUTEX_WAKE with no waiter, in a loop;
# - a thread wake-up: two threads passing a token through futexes, on one
#   core and on two (a round trip is two wake-ups);
# - the core's peak: 12 independent chains of FMAs (AVX-512 where the CPU
#   has it, else AVX2), what no SGEMM can beat; and the same on cores 0
#   and 1 at once (two vCPUs that are one core's hyperthreads share it);
# - reading 1 MiB that the other core has just written, against reading it
#   after writing it on the same core (what a pass pays when a thread reads
#   another's output); and writing 1 MiB that the other core has just read,
#   against writing it after reading it on the same core (what a pass pays
#   when it overwrites a buffer both threads read: the lines must be taken
#   from the other core's cache first).
#
#   scripts/bench/machine-probe.sh
#
# Needs gcc and libopenblas-dev (scripts/setup.sh installs both).
set -euo pipefail
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/probe.c" <<'EOF'
#define _GNU_SOURCE
#include <cblas.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

// best of 5 runs of at least 0.3 s each, in GFLOP/s
static double sgemm(int m, int n, int k) {
	float *a = malloc(4L * m * k), *b = malloc(4L * k * n), *c = malloc(4L * m * n);
	for (long i = 0; i < (long)m * k; i++) a[i] = 1e-3f * (i % 7);
	for (long i = 0; i < (long)k * n; i++) b[i] = 1e-3f * (i % 5);
	double best = 1e9;
	for (int r = 0; r < 6; r++) {
		double t = now();
		int it = 0;
		do {
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1, a, k, b, n, 0, c, n);
			it++;
		} while (now() - t < 0.3);
		double d = (now() - t) / it;
		if (r > 0 && d < best) best = d;
	}
	free(a), free(b), free(c);
	return 2.0 * m * n * k / best / 1e9;
}

static void faults(int huge) {
	size_t n = 256 << 20;
	double best = 1e9;
	for (int r = 0; r < 5; r++) {
		char *p = mmap(0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) abort();
		if (huge) madvise(p, n, MADV_HUGEPAGE);
		double t = now();
		for (size_t i = 0; i < n; i += 4096) p[i] = 1;
		double d = now() - t;
		if (d < best) best = d;
		munmap(p, n);
	}
	printf("first touch of a 256 MiB mapping%s: %.3f us a 4 KiB page (best of 5)\n",
	       huge ? ", MADV_HUGEPAGE" : "", best * 1e6 / (n / 4096));
}

static _Atomic unsigned tok;
static int rounds = 20000;
static void fwait(unsigned v) { syscall(SYS_futex, &tok, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0); }
static void fwake(void) { syscall(SYS_futex, &tok, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0); }
static void pin(int cpu) {
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	sched_setaffinity(0, sizeof s, &s);
}
// the partner waits for odd values and answers with the next even one
static void *partner(void *arg) {
	pin((int)(long)arg);
	for (int i = 0; i < rounds; i++) {
		unsigned v;
		while (((v = atomic_load(&tok)) & 1) == 0) fwait(v);
		atomic_store(&tok, v + 1);
		fwake();
	}
	return NULL;
}
static void pingpong(int cpu0, int cpu1) {
	atomic_store(&tok, 0);
	pthread_t t;
	pthread_create(&t, NULL, partner, (void *)(long)cpu1);
	pin(cpu0);
	usleep(10000);
	double t0 = now();
	for (int i = 0; i < rounds; i++) {
		unsigned v = atomic_load(&tok) + 1;
		atomic_store(&tok, v);
		fwake();
		while ((atomic_load(&tok) & 1) == 1) fwait(v);
	}
	double d = now() - t0;
	pthread_join(t, NULL);
	printf("futex hand-off, threads on cores %d and %d: %.1f us a wake-up (%d round trips)\n", cpu0, cpu1,
	       d * 1e6 / (2 * rounds), rounds);
}

// FMAS(r) is 12 independent FMA chains on registers r2 to r13 (r: zmm or
// ymm), in a loop of n turns.
#define FMA(r, i) "vfmadd231ps %%" r "1, %%" r "1, %%" r #i "\n"
#define FMAS(r)                                                                                       \
	"vxorps %%" r "1, %%" r "1, %%" r "1\n1:\n" FMA(r, 2) FMA(r, 3) FMA(r, 4) FMA(r, 5) FMA(r, 6) FMA(r, 7) \
	    FMA(r, 8) FMA(r, 9) FMA(r, 10) FMA(r, 11) FMA(r, 12) FMA(r, 13) "dec %0\njnz 1b\n"
#define CLOBBERS "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13"
__attribute__((target("avx512f"))) static double fma512(long n) {
	double t0 = now();
	__asm__ volatile(FMAS("zmm") : "+r"(n)::CLOBBERS);
	return now() - t0;
}
__attribute__((target("avx2,fma"))) static double fma256(long n) {
	double t0 = now();
	__asm__ volatile(FMAS("ymm") : "+r"(n)::CLOBBERS);
	return now() - t0;
}
static void fma_peak(void) {
	long n = 200000000;
	int wide = __builtin_cpu_supports("avx512f");
	double best = 1e9;
	for (int i = 0; i < 3; i++) {
		double d = wide ? fma512(n) : fma256(n);
		if (d < best) best = d;
	}
	printf("FMA peak, one thread, 12 chains of %s: %.1f GFLOP/s\n", wide ? "AVX-512" : "AVX2",
	       (double)n * 12 * (wide ? 32 : 16) / best / 1e9);
}

// fma_pair: the same chains on cores 0 and 1 at once, each thread's rate.
// Two vCPUs that are one physical core's two hyperthreads share its FMA
// units and give about one core's rate between them; two cores give two.
static void *fma_other(void *arg) {
	pin(1);
	int wide = __builtin_cpu_supports("avx512f");
	*(double *)arg = wide ? fma512(200000000) : fma256(200000000);
	return NULL;
}
static void fma_pair(void) {
	long n = 200000000;
	int wide = __builtin_cpu_supports("avx512f");
	double per = (double)n * 12 * (wide ? 32 : 16) / 1e9, best0 = 1e9, best1 = 1e9;
	for (int i = 0; i < 3; i++) {
		double d1 = 0;
		pthread_t t;
		pthread_create(&t, NULL, fma_other, &d1);
		pin(0);
		double d0 = wide ? fma512(n) : fma256(n);
		pthread_join(t, NULL);
		if (d0 < best0) best0 = d0;
		if (d1 < best1) best1 = d1;
	}
	printf("FMA peak, cores 0 and 1 at once: %.1f and %.1f GFLOP/s\n", per / best0, per / best1);
}

// cross: thread B (core 1) writes a buffer, then core 0 reads it; then
// core 0 writes and reads it again. Then B reads it and core 0 writes it;
// then core 0 reads and writes it again.
#define XN (1 << 18) // 1 MiB of uint32
static uint32_t *xbuf;
static _Atomic int xphase;
static volatile uint32_t xsink;
__attribute__((target_clones("avx512f", "avx2", "default"))) static uint32_t xsum(void) {
	uint32_t s = 0;
	for (int i = 0; i < XN; i++) s += xbuf[i];
	return s;
}
__attribute__((target_clones("avx512f", "avx2", "default"))) static void xfill(uint32_t k) {
	for (int i = 0; i < XN; i++) xbuf[i] = (uint32_t)i * k;
}
static void *xwriter(void *arg) {
	(void)arg;
	pin(1);
	for (uint32_t it = 1;; it++) {
		int p;
		while ((p = atomic_load(&xphase)) != 1 && p != 3)
			if (p == 9) return NULL;
		if (p == 1)
			xfill(it);
		else
			xsink += xsum();
		atomic_store(&xphase, p + 1);
	}
}
static void cross(void) {
	xbuf = aligned_alloc(64, XN * sizeof(uint32_t));
	pthread_t t;
	pthread_create(&t, NULL, xwriter, NULL);
	pin(0);
	double other = 0, own = 0;
	volatile uint32_t sink = 0;
	int reps = 300;
	for (int r = 0; r < reps; r++) {
		atomic_store(&xphase, 1);
		while (atomic_load(&xphase) != 2) {
		}
		double t0 = now();
		sink += xsum();
		other += now() - t0;
		xfill(3);
		t0 = now();
		sink += xsum();
		own += now() - t0;
	}
	double wother = 0, wown = 0;
	for (int r = 0; r < reps; r++) {
		atomic_store(&xphase, 3);
		while (atomic_load(&xphase) != 4) {
		}
		double t0 = now();
		xfill(5);
		wother += now() - t0;
		sink += xsum();
		t0 = now();
		xfill(7);
		wown += now() - t0;
	}
	atomic_store(&xphase, 9);
	pthread_join(t, NULL);
	double bytes = (double)XN * sizeof(uint32_t) * reps;
	printf("reading 1 MiB on core 0: written by core 1 %.1f GB/s, written by core 0 %.1f GB/s\n", bytes / other / 1e9,
	       bytes / own / 1e9);
	printf("writing 1 MiB on core 0: last read by core 1 %.1f GB/s, last read by core 0 %.1f GB/s\n", bytes / wother / 1e9,
	       bytes / wown / 1e9);
	(void)sink;
}

int main(int argc, char **argv) {
	if (argc > 1 && !strcmp(argv[1], "sgemm")) {
		printf("OpenBLAS %-10s SGEMM, one thread: 1024^3 %.1f GFLOP/s, 196x16x16 %.1f GFLOP/s\n",
		       openblas_get_corename(), sgemm(1024, 1024, 1024), sgemm(196, 16, 16));
		return 0;
	}
	faults(0);
	faults(1);
	unsigned a = 0;
	int n = 200000;
	double t = now();
	for (int i = 0; i < n; i++) syscall(SYS_futex, &a, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
	printf("system call (FUTEX_WAKE, no waiter): %.2f us\n", (now() - t) / n * 1e6);
	pingpong(0, 0);
	if (sysconf(_SC_NPROCESSORS_ONLN) > 1) pingpong(0, 1);
	fma_peak();
	if (sysconf(_SC_NPROCESSORS_ONLN) > 1) fma_pair();
	if (sysconf(_SC_NPROCESSORS_ONLN) > 1) cross();
	return 0;
}
EOF
gcc -O3 -o "$dir/probe" "$dir/probe.c" -lopenblas -lpthread
echo "# $(awk -F': ' '/^model name/{m=$2} /^cpu family/{f=$2} /^model\t/{n=$2} END{print m", family "f" model "n}' /proc/cpuinfo), $(nproc) cores; OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-(unset)}"
export OPENBLAS_NUM_THREADS=1
for core in Haswell SkylakeX Cooperlake; do
	flags=$(grep -m1 '^flags' /proc/cpuinfo)
	[[ $core != Haswell && $flags != *avx512f* ]] && continue
	[[ $core == Cooperlake && $flags != *avx512_bf16* ]] && continue
	OPENBLAS_CORETYPE=$core "$dir/probe" sgemm
done
env -u OPENBLAS_CORETYPE "$dir/probe" sgemm | sed 's/^OpenBLAS/OpenBLAS (its own choice)/'
"$dir/probe"
