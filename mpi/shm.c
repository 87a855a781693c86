// Ranks of one host reducing through one shared segment (shm.go): each
// rank's buffer lives in the segment, and every rank reads the others'
// directly, one fused read-add-write with no kernel copy. See shm.go for
// why.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shm.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VEC __attribute__((target_clones("arch=x86-64-v3", "default")))
#define PAUSE() __builtin_ia32_pause()
#else
#define VEC
#define PAUSE() ((void)0)
#endif

// A rank's arrival counter, one per cache line.
#define LINE 64

int tr_shm_map(const char *name, size_t bytes, int create, void **base) {
	int fd = shm_open(name, create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
	if (fd < 0) return errno;
	if (create) {
		if (ftruncate(fd, (off_t)bytes) != 0) {
			int e = errno;
			close(fd);
			return e;
		}
		// Reserve the pages now: a full /dev/shm (64 MB in a default
		// container) is ENOSPC here, not SIGBUS at the first touch.
		int e = posix_fallocate(fd, 0, (off_t)bytes);
		if (e != 0) {
			close(fd);
			return e;
		}
	}
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	int e = errno;
	close(fd);
	if (p == MAP_FAILED) return e;
	*base = p;
	return 0;
}

int tr_shm_unlink(const char *name) { return shm_unlink(name) == 0 ? 0 : errno; }
void tr_shm_unmap(void *base, size_t bytes) { munmap(base, bytes); }

static _Atomic uint64_t *arrival(void *base, int r) { return (_Atomic uint64_t *)((char *)base + (size_t)r * LINE); }

// word is the low 32 bits of rank r's counter, the futex its waiters
// sleep on (a shared futex: the segment is mapped by several processes);
// sleepers counts them, in the same line.
static uint32_t *word(void *base, int r) { return (uint32_t *)((char *)base + (size_t)r * LINE); }
static _Atomic uint32_t *sleepers(void *base, int r) { return (_Atomic uint32_t *)((char *)base + (size_t)r * LINE + 8); }

static uint64_t now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

// SPIN_NS: how long a rank spins for a late one before sleeping. Ranks on
// cores of their own meet within microseconds; a rank that waits longer
// (the others still in backward) gives its core to its own computation.
#define SPIN_NS 50000

// barrier: this rank has reached v; wait for every rank to: spin up to
// SPIN_NS, then sleep on the late rank's futex (1 ms at most, then look
// again). The arriving rank wakes its sleepers only when there are any
// (seq_cst on both sides: a sleeper that registered late finds the new
// value in FUTEX_WAIT's comparison and does not sleep).
// oversub: the host's ranks outnumber its CPUs (shm.go), so the rank it
// waits for may be waiting for this very CPU: each turn of the spin
// yields it (sched_yield) instead of pausing on it. Pausing, 4 ranks on 2
// vCPUs spent each barrier's first 50 us keeping the late ranks off the
// cores, then paid a futex wake-up to come back.
static void barrier(void *base, int rank, int size, uint64_t v, int oversub) {
	atomic_store(arrival(base, rank), v);
	if (atomic_load(sleepers(base, rank)) > 0)
		syscall(SYS_futex, word(base, rank), FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
	uint64_t t0 = 0;
	for (int q = 0; q < size; q++) {
		uint64_t a;
		int spins = 0;
		while ((a = atomic_load(arrival(base, q))) < v) {
			if (oversub)
				sched_yield();
			else if (++spins % 64) {
				PAUSE();
				continue;
			}
			if (!t0) t0 = now_ns();
			if (now_ns() - t0 < SPIN_NS) continue;
			struct timespec ms = {0, 1000000};
			atomic_fetch_add(sleepers(base, q), 1);
			syscall(SYS_futex, word(base, q), FUTEX_WAIT, (uint32_t)a, &ms, NULL, 0);
			atomic_fetch_sub(sleepers(base, q), 1);
		}
	}
}

static float *region(void *base, size_t ctl, size_t stride, int q) {
	return (float *)((char *)base + ctl + (size_t)q * stride);
}

// BLOCK floats are summed at a time in a buffer that stays in L1.
#define BLOCK 2048

VEC static void reduce_block(float **src, int size, size_t n, float scale, int mean) {
	float acc[BLOCK];
	memcpy(acc, src[0], n * sizeof(float));
	for (int q = 1; q < size; q++) {
		const float *s = src[q];
		for (size_t j = 0; j < n; j++) acc[j] += s[j];
	}
	if (mean)
		for (size_t j = 0; j < n; j++) acc[j] *= scale;
	for (int q = 0; q < size; q++) memcpy(src[q], acc, n * sizeof(float));
}

// chunk_of is rank r's share of n floats, cut at multiples of 16 floats
// (64 bytes) so that no two ranks write one cache line.
static void chunk_of(size_t n, int r, int size, size_t *lo, size_t *hi) {
	size_t lines = (n + 15) / 16;
	*lo = lines * (size_t)r / (size_t)size * 16;
	*hi = lines * (size_t)(r + 1) / (size_t)size * 16;
	if (*lo > n) *lo = n;
	if (*hi > n) *hi = n;
}

// ring_chunk is the chunk of the ring allreduce (ring.go: n floats cut
// into size chunks, the first n % size one longer) that element j lies
// in, and that chunk's end.
static int ring_chunk(size_t n, int size, size_t j, size_t *end) {
	size_t q = n / (size_t)size, rem = n % (size_t)size, c;
	if (j < rem * (q + 1))
		c = j / (q + 1);
	else
		c = rem + (j - rem * (q + 1)) / q;
	*end = c * q + (c < rem ? c : rem) + q + (c < rem);
	return (int)c;
}

// claims is rank r's chunk's counter of call seq's claimed blocks
// (tr_shm_allreduce), on a line of its own after the ranks' arrival
// lines: two sets of size lines, used by turns. Every call (allreduce or
// bcast: they share seq) has each rank clear its own counter of the set
// call seq+1 will use, after seq's start barrier: call seq-1 used that
// set, and every rank left it at seq-1's end barrier; call seq+1 reads it
// only after seq's end barrier.
static _Atomic uint64_t *claims(void *base, int size, uint64_t seq, int r) {
	return (_Atomic uint64_t *)((char *)base + (size_t)(size + (int)(seq & 1) * size + r) * LINE);
}

// slice is rank r's call's offset and length, in its arrival line after
// the counter and the sleepers: written before its arrival (seq_cst) and
// read by the others after they see it; rewritten only for the next call,
// after every rank has passed this one's end barrier.
static _Atomic uint64_t *slice(void *base, int r) { return (_Atomic uint64_t *)((char *)base + (size_t)r * LINE + 16); }

// start is a call's first barrier (every rank's values are in place),
// with this rank's slice published for the others, then this rank clears
// its counter for the next call. It returns -1 when every rank called
// with the same slice, else the first rank whose slice is not rank 0's,
// its slice and rank 0's in bad: every rank reads the same values, so
// every rank finds the same answer and none goes on alone. With the
// blocks claimed across the ranks' shares, a rank with a shorter slice
// would otherwise leave its blocks to the others, and the replicas could
// agree on a sum the caller did not ask for.
static int start(void *base, int rank, int size, int oversub, uint64_t seq, size_t off, size_t n, uint64_t *bad) {
	atomic_store_explicit(slice(base, rank), off, memory_order_relaxed);
	atomic_store_explicit(slice(base, rank) + 1, n, memory_order_relaxed);
	barrier(base, rank, size, 2 * seq + 1, oversub);
	atomic_store_explicit(claims(base, size, seq + 1, rank), 0, memory_order_relaxed);
	uint64_t o0 = atomic_load_explicit(slice(base, 0), memory_order_relaxed);
	uint64_t n0 = atomic_load_explicit(slice(base, 0) + 1, memory_order_relaxed);
	for (int q = 1; q < size; q++) {
		uint64_t o = atomic_load_explicit(slice(base, q), memory_order_relaxed);
		uint64_t m = atomic_load_explicit(slice(base, q) + 1, memory_order_relaxed);
		if (o != o0 || m != n0) {
			bad[0] = o, bad[1] = m, bad[2] = o0, bad[3] = n0;
			return q;
		}
	}
	return -1;
}

// claim_floats is the size of a claimed block of a chunk of m floats:
// about 8 a chunk, of 4,096 to 65,536 floats (16 KB to 256 KB: a claim, a
// locked add on a shared line, against 3 to 50 us of memory traffic),
// whole cache lines.
static size_t claim_floats(size_t m) {
	size_t b = m / 8;
	b = b < 4096 ? 4096 : b > 65536 ? 65536 : b;
	return (b + 15) / 16 * 16;
}

// reduce_range sums elements [lo, hi) of every rank's copy into all of
// them, BLOCK floats at a time within each ring chunk.
static void reduce_range(void *base, size_t ctl, size_t stride, int size, size_t off, size_t n, size_t lo, size_t hi,
                         int mean) {
	float *src[size];
	float scale = 1.0f / (float)size;
	for (size_t b = lo; b < hi;) {
		size_t end;
		int c = ring_chunk(n, size, b, &end);
		size_t m = hi - b < BLOCK ? hi - b : BLOCK;
		if (b + m > end) m = end - b;
		for (int q = 0; q < size; q++) src[q] = region(base, ctl, stride, (c + q) % size) + off + b;
		reduce_block(src, size, m, scale, mean);
		b += m;
	}
}

// Each element is summed in the order the ring sums it (its ring chunk c
// starts at rank c and adds ranks c+1, c+2, ... around), so that the two
// give the same bits and swapping one for the other changes no result.
// Which rank sums an element does not change its bits, so a rank that
// has summed its own chunk (chunk_of), block by claimed block, goes on to
// claim the blocks left in the others' rather than wait at the end
// barrier: a rank on a slower or busier core (this project's 2-vCPU VMs'
// two run up to 1.2x apart; ranks oversubscribing the cores) then sums
// less. Each rank starts on its own chunk, which it summed the call
// before: in a loop over one buffer its lines may still be in its cache.
int tr_shm_allreduce(void *base, size_t ctl, size_t stride, int rank, int size, int oversub, size_t off, size_t n,
                     int mean, uint64_t seq, uint64_t *bad) {
	int q = start(base, rank, size, oversub, seq, off, n, bad);
	for (int i = 0; q < 0 && i < size; i++) {
		int r = (rank + i) % size;
		size_t lo, hi;
		chunk_of(n, r, size, &lo, &hi);
		_Atomic uint64_t *next = claims(base, size, seq, r);
		size_t bf = claim_floats(hi - lo);
		// Another's counter is read before it is added to: a spent one
		// is not written for nothing.
		if (i > 0 && lo + atomic_load_explicit(next, memory_order_relaxed) * bf >= hi) continue;
		for (;;) {
			size_t b = lo + (size_t)atomic_fetch_add_explicit(next, 1, memory_order_relaxed) * bf;
			if (b >= hi) break;
			reduce_range(base, ctl, stride, size, off, n, b, b + bf < hi ? b + bf : hi, mean);
		}
	}
	barrier(base, rank, size, 2 * seq + 2, oversub); // every chunk is summed everywhere
	return q;
}

int tr_shm_bcast(void *base, size_t ctl, size_t stride, int rank, int size, int oversub, int root, size_t off,
                 size_t n, uint64_t seq, uint64_t *bad) {
	int q = start(base, rank, size, oversub, seq, off, n, bad);
	if (q < 0 && rank != root)
		memcpy(region(base, ctl, stride, rank) + off, region(base, ctl, stride, root) + off, n * sizeof(float));
	barrier(base, rank, size, 2 * seq + 2, oversub);
	return q;
}
