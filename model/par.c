// The rank's one pool of compute threads (--threads), and the parallel
// passes that run on it. Why C threads and not goroutines: measured, two
// goroutines each making short cgo calls (an im2col, a 100 us SGEMM) ran
// 1.3 to 1.6 times slower per thread than alone, while the same calls
// from two pthreads ran at full speed: with every P inside cgo, the Go
// scheduler hands a P to a spinning M that takes a core from the
// computation. Here Go makes one cgo call per pass and the threads below
// are invisible to it.
//
// OpenBLAS is held to one thread (trainer's loadBLAS) and each part calls
// it on its own share: one pool, never two fighting over the cores.
//
// Reductions (a weight gradient over the images, BatchNorm's sums) are
// cut into parts by the data's shape alone and summed in an order the
// part count alone fixes (in part order; a weight gradient's in
// sum_first's groups), so a result does not depend on the thread count.
#define _GNU_SOURCE // sched_getaffinity
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "kernels.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VEC __attribute__((target_clones("arch=x86-64-v3", "default")))
#define PAUSE() __builtin_ia32_pause()
#else
#define VEC
#define PAUSE() ((void)0)
#endif

// ---- SGEMM: OpenBLAS's cblas_sgemm when loaded, else a plain loop (or
// --gemm's: gemm_amx.c, gemm_avx512.c) ----

typedef void (*sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                         int lda, const float *b, int ldb, float beta, float *c, int ldc);
static sgemm_fn blas;

void k_set_sgemm(void *f) { blas = (sgemm_fn)f; }

// gemm_ref is row-major C = alpha op(A) op(B) + beta C, for a process
// without OpenBLAS (as slow as gonum's pure Go, which it replaces here).
VEC static void gemm_ref(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *a,
                         size_t lda, const float *b, size_t ldb, float beta, float *c, size_t ldc) {
	for (size_t i = 0; i < m; i++) {
		float *ci = c + i * ldc;
		if (beta == 0)
			memset(ci, 0, n * sizeof(float));
		else if (beta != 1)
			for (size_t j = 0; j < n; j++) ci[j] *= beta;
		for (size_t p = 0; p < k; p++) {
			float av = alpha * (ta ? a[p * lda + i] : a[i * lda + p]);
			if (tb)
				for (size_t j = 0; j < n; j++) ci[j] += av * b[j * ldb + p];
			else
				for (size_t j = 0; j < n; j++) ci[j] += av * b[p * ldb + j];
		}
	}
}

void k_sgemm1(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
              const float *b, size_t ldb, float beta, float *c, size_t ldc) {
	if (m == 0 || n == 0) return;
	if (k_amx_on() && k_sgemm_amx(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) == 0) return;
	if (k_avx512_on() && k_sgemm_avx512(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) == 0) return;
	if (blas)
		blas(101, ta ? 112 : 111, tb ? 112 : 111, (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb,
		     beta, c, (int)ldc);
	else
		gemm_ref(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// ---- the pool ----

// SPIN_S: seconds a waiting thread (a worker for the next pass, the
// caller for a pass's end) spins before sleeping, so that a pass starts
// without a futex wake-up on each thread: longer than the caller's
// serial work between two passes. Timed, not counted: it was 4,000
// pauses, 22 us on the Intel VM where a PAUSE took 5.5 ns
// (docs/ARCHITECTURE.md) and 80 us on the Zen 5 one (20 ns), where the
// MLP's serial gaps of 110 to 210 us put the worker to sleep before most
// passes, its first chunk then 40 to 80 us late (`train bench step --model mlp --threads 2 --passes`). The MLP
// at 2 threads, 400 steps, 3 rounds A B: 55,600 to 99,400 samples/s
// counted, 100,700 to 107,300 timed at 250 us; over 2,000 steps both
// ran 161,600 to 174,500 (one thread 142,800); ResNet-20 at 2 threads
// 0.99 to 1.03 (6 rounds).
// SPIN_YIELDS: turns of sched_yield instead, where the threads
// oversubscribe the CPUs (oversub, below).
#define SPIN_S 250e-6
#define SPIN_YIELDS 4000

typedef void (*task_fn)(void *ctx, size_t lo, size_t hi, int w);

static pthread_mutex_t busy = PTHREAD_MUTEX_INITIALIZER; // one pass at a time
static int nthreads = 1, created = 0;
// oversub: more threads than the rank's CPUs (k_set_cpus's count, else
// this process's affinity). A waiting thread then yields its CPU at every
// turn of its wait instead of pausing: the thread it waits for may need
// that very CPU. ResNet-20 at 16 threads on 2 CPUs, spinning: 246 ms a
// step against 88 on one. Atomic: spinning workers read it while
// k_set_cpus may change it.
static _Atomic int oversub;
static int cpus_given; // k_set_cpus's count, 0 for the affinity's

// proc_cpu lists this process's CPUs in order (at most MAXT of them) and
// proc_n counts them all, -1 until find_cpus: its affinity when the pool
// first looked, before k_pin narrowed the calling thread's to one CPU
// (read again after that, it would say one). Under busy.
static int proc_cpu[MAXT], proc_n = -1;

static void find_cpus(void) {
	if (proc_n >= 0) return;
	cpu_set_t set;
	proc_n = 0;
	if (sched_getaffinity(0, sizeof set, &set) != 0) return;
	proc_n = CPU_COUNT(&set);
	for (int c = 0, i = 0; c < CPU_SETSIZE && i < MAXT; c++)
		if (CPU_ISSET(c, &set)) proc_cpu[i++] = c;
}

// set_oversub sets oversub from nthreads and the CPUs: k_set_cpus's count,
// else this process's affinity. Under busy.
static void set_oversub(void) {
	int c = cpus_given;
	if (c == 0) {
		find_cpus();
		c = proc_n;
	}
	atomic_store_explicit(&oversub, c > 0 && nthreads > c, memory_order_relaxed);
}
static int sim_T; // T threads simulated on the caller (below)
// The pass's hand-off, on cache lines by who writes them while other
// threads read them. The linker had packed the pass's description, gen,
// the count of workers still in the pass and both sleeper counts into one
// 64-byte line (nm -n train), so every worker's decrement of that count
// at the end of its share, and every sleeper count's change, took the
// line from the threads still running chunks, which read the description
// at every chunk; and at a pass's start the caller's stores to it raced
// the spinning workers' reads of gen beside them. Apart:
// - cur and gen: written by the caller only while no pass runs (cur, then
//   gen's increment), then only read: a woken worker gets both in one
//   line.
// - finished[w]: worker w's last pass done, the pass's gen, on its own
//   line, where one count had taken T-1 locked writes on one line at
//   every pass's end, one core after another: with 16 threads finishing
//   together (the shares are balanced to end so), the last of them
//   waited for the other 14 to pass the line along. The caller reads the
//   workers' lines in turn; those reads share the lines.
// - ends: the caller asleep waiting for them (sleeper), and a count that
//   a finishing worker bumps, and wakes it on, only then (seq).
// - gen_sleepers: a worker's going to sleep and waking.
struct pass {
	task_fn fn;
	void *ctx;
	size_t units, chunk;
	int T, prof; // prof: the per-thread times are taken (ptimes)
	_Atomic unsigned gen;
} __attribute__((aligned(64)));
static struct pass cur;
struct finished {
	_Atomic unsigned gen;
} __attribute__((aligned(64)));
static struct finished finished[MAXT];
struct ends {
	_Atomic unsigned seq, sleeper;
} __attribute__((aligned(64)));
static struct ends ends;
// Sleepers on gen (workers) and on ends.seq (the caller): a pass makes
// its futex wake-up calls only when someone sleeps. A system call costs 1
// to 1.5 us on this project's VM (a FUTEX_WAKE with no waiter, timed in a
// loop), and a pass made two, for nothing whenever the threads were still
// spinning (ResNet-20 at one rank of 2 threads: 1.026x, 5 of 6 paired
// rounds).
// The counts, flags and the values they guard are seq_cst: a thread that
// counts itself (or flags itself) and then finds no change sleeps, and the
// other side, having changed the value, then sees the count and wakes it
// (or the futex call, which compares the value again, returns at once).
static _Atomic unsigned gen_sleepers __attribute__((aligned(64)));
// share is a thread's home part of a pass's chunks, [next, end), on a
// line of its own.
struct share {
	_Atomic size_t next;
	size_t end;
} __attribute__((aligned(64)));
static struct share shares[MAXT];
// ptimes: each thread's first chunk's start and last chunk's end in the
// current pass, taken only while cur.prof (the pass profile's per-thread
// times, below; set by the caller before it starts the pass, so a pass
// is timed by all its threads or by none).
struct ptime {
	double start, end;
} __attribute__((aligned(64)));
static struct ptime ptimes[MAXT];
static double prof_now(void);
static unsigned start_gen[MAXT];

static void fwait(_Atomic unsigned *a, unsigned v) {
	syscall(SYS_futex, (unsigned *)a, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}
static void fwake(_Atomic unsigned *a) { syscall(SYS_futex, (unsigned *)a, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0); }

// spinner is one wait's spinning: spinning is a turn of it, 1 while the
// wait should go on spinning, 0 once it should sleep. The clock is read every
// 64 pauses (a vDSO call, ~20 ns, against 64 pauses' 1.3 to 2.6 us).
struct spinner {
	int turns;
	double until;
};

static int spinning(struct spinner *s) {
	if (atomic_load_explicit(&oversub, memory_order_relaxed)) {
		sched_yield();
		return ++s->turns < SPIN_YIELDS;
	}
	if (s->turns++ == 0) s->until = prof_now() + SPIN_S;
	PAUSE();
	return s->turns % 64 != 0 || prof_now() < s->until;
}

// take runs chunks of the current pass until none is left: first its
// own share's in order, then the others' (the next free chunk of each).
// Another's share is read before it is taken from (next only grows, so a
// share read as spent is spent): a fetch_add on a spent share writes its
// line for nothing, and at the end of a pass every thread would write
// every other thread's line, T*(T-1) locked operations each taking the
// line from the core that last wrote it, one after another on each
// thread, where plain reads share the line and overlap.
// steal_read 0 takes without reading first, as before: BenchmarkPass's
// A/B (k_steal_read), not for training.
static int steal_read = 1;
void k_steal_read(int on) { steal_read = on; }

static void take(int w) {
	// The description read once (it changes only between passes).
	int T = cur.T;
	task_fn fn = cur.fn;
	void *ctx = cur.ctx;
	size_t units = cur.units, chunk = cur.chunk;
	for (int i = 0; i < T; i++) {
		struct share *s = &shares[(w + i) % T];
		if (i > 0 && steal_read && atomic_load_explicit(&s->next, memory_order_relaxed) >= s->end) continue;
		for (;;) {
			size_t c = atomic_fetch_add(&s->next, 1);
			if (c >= s->end) break;
			size_t lo = c * chunk;
			fn(ctx, lo, lo + chunk < units ? lo + chunk : units, w);
		}
	}
}

static void *worker(void *arg) {
	int w = (int)(intptr_t)arg;
	unsigned seen = start_gen[w];
	for (;;) {
		unsigned g;
		struct spinner sp = {0};
		while ((g = atomic_load(&cur.gen)) == seen) {
			if (spinning(&sp)) continue;
			atomic_fetch_add(&gen_sleepers, 1);
			if (atomic_load(&cur.gen) == seen) fwait(&cur.gen, seen);
			atomic_fetch_sub(&gen_sleepers, 1);
		}
		seen = g;
		if (w < cur.T) {
			int prof = cur.prof;
			if (prof) ptimes[w].start = prof_now();
			take(w);
			if (prof) ptimes[w].end = prof_now();
		}
		atomic_store(&finished[w].gen, g);
		if (atomic_load(&ends.sleeper)) {
			atomic_fetch_add(&ends.seq, 1);
			fwake(&ends.seq);
		}
	}
	return NULL;
}

static pthread_t handles[MAXT]; // the workers' (k_pin)

// k_set_threads sizes the pool to n threads (the caller's and n-1
// workers); it returns the size it got (workers that fail to start leave
// fewer).
int k_set_threads(int n) {
	if (n < 1) n = 1;
	if (n > MAXT) n = MAXT;
	pthread_mutex_lock(&busy);
	while (created < n - 1) {
		int w = created + 1;
		start_gen[w] = atomic_load(&cur.gen);
		pthread_t t;
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		int err = pthread_create(&t, &at, worker, (void *)(intptr_t)w);
		pthread_attr_destroy(&at);
		if (err) break;
		handles[w] = t;
		created++;
	}
	nthreads = n <= created + 1 ? n : created + 1;
	set_oversub();
	sim_T = 0;
	pthread_mutex_unlock(&busy);
	return nthreads;
}

// k_set_cpus says how many CPUs the pool's threads share (the trainer's
// count: its affinity, or a node's CPUs shared among its ranks when they
// are not bound; 0: this process's affinity), and returns whether the
// pool now has more threads than that.
int k_set_cpus(int n) {
	pthread_mutex_lock(&busy);
	cpus_given = n > 0 ? n : 0;
	set_oversub();
	int o = atomic_load(&oversub);
	pthread_mutex_unlock(&busy);
	return o;
}

// pinned: whether the pool's threads are pinned now (k_pin).
static int pinned;

// pin_to lets thread t run on CPU c only, or (c < 0) on all of the
// process's again. Only called with the threads pinned or about to be,
// when the process has at most MAXT CPUs (k_pin), all in proc_cpu.
static void pin_to(pthread_t t, int c) {
	cpu_set_t set;
	CPU_ZERO(&set);
	if (c >= 0)
		CPU_SET(c, &set);
	else
		for (int i = 0; i < proc_n; i++) CPU_SET(proc_cpu[i], &set);
	pthread_setaffinity_np(t, sizeof set, &set);
}

// k_pin pins thread w of the pool (0: the calling thread, which the
// caller keeps for the passes) to the w-th of the process's CPUs when the
// pool has exactly one thread per CPU (and the CPUs are not shared with
// other ranks, k_set_cpus), and otherwise undoes an earlier pinning; it
// returns whether the threads are pinned. Why: unpinned, the kernel moves
// the threads between the CPUs now and then, and a pass's parts then
// find the data the previous pass left in the other core's cache.
// ResNet-20 at one rank of 2 threads on the Zen 5 VM (2 vCPUs),
// scripts/bench/ab-step.sh: 1.014 (11 of 16 rounds faster; 25.17 -> 24.82
// ms a step), and 1.024 and 1.015 (6 of 9, 8 of 12) in a first version;
// the GPT 1.003 (4 of 8) and 0.978 (2 of 6): no change. A thread of the
// calling goroutine's that is not the one Pin locked (another goroutine
// starting a pass) runs unpinned, which costs nothing but the gain.
int k_pin(void) {
	pthread_mutex_lock(&busy);
	find_cpus();
	int want = nthreads > 1 && nthreads == proc_n && (cpus_given == 0 || cpus_given == proc_n);
	if (want || pinned) {
		for (int w = 1; w <= created; w++) pin_to(handles[w], want && w < nthreads ? proc_cpu[w] : -1);
		pin_to(pthread_self(), want ? proc_cpu[0] : -1);
	}
	pinned = want;
	pthread_mutex_unlock(&busy);
	return want;
}

// k_pinned_cpu is the one CPU thread w of the pool may run on (0: the
// calling thread), -1 where it may run on several (tests).
int k_pinned_cpu(int w) {
	cpu_set_t set;
	if (w < 0 || w >= MAXT || (w > 0 && w > created) || pthread_getaffinity_np(w ? handles[w] : pthread_self(), sizeof set, &set))
		return -1;
	if (CPU_COUNT(&set) != 1) return -1;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set)) return c;
	return -1;
}

// ---- the pass profile (train bench step --passes) ----

// While on, every pass adds its time to the entry of its task and unit
// count: the whole pass as the caller saw it, and the part of it the
// caller spent waiting, its own chunks done, for the other threads to
// finish theirs (a pass's tail: the threads' imbalance and a late
// worker's start). Products that k_sgemm makes in one call count as a
// pass of t_gemm_rows of one unit, so that one thread's table has them
// too. Off, a pass pays one predictable branch.
// Each thread of a pass also times its own part (ptimes): from the
// pass's start to its first chunk (late: a worker's wake-up, summed
// over the workers) and from its first chunk to its last chunk's end
// (busy, summed over the threads). The caller's wait alone cannot tell
// a worker that started late from one whose chunks ran slow, nor a
// pass that waited from one whose work grew with the threads: on the
// 16-core machine (2026-11-30) ResNet-20's passes that read what other
// cores wrote took 4 to 18 times one thread's time, by the caller's own
// share times 16, with 28% of the passes' time waiting.
#define PROF_MAX 128
struct k_pass_prof {
	task_fn fn;
	size_t units;
	unsigned long n;
	double total, wait;
	double work; // the units' time on one thread: simulated passes, and those run on the caller alone
	double late, busy;     // the workers' start delays, and every thread's time in its chunks
	unsigned long workers; // the workers that took part, over the passes (late's count)
};
static struct k_pass_prof prof[PROF_MAX];
static int nprof;
static _Atomic int prof_on;

static double prof_now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

// prof_add records one pass (entries past PROF_MAX are dropped and
// counted in the last).
static void prof_add(task_fn fn, size_t units, double t0, double t1, double t2, double work, double late,
                     double busy, unsigned long workers) {
	int i = 0;
	while (i < nprof && !(prof[i].fn == fn && prof[i].units == units)) i++;
	if (i == nprof) {
		if (nprof == PROF_MAX) i = PROF_MAX - 1;
		else prof[nprof++] = (struct k_pass_prof){.fn = fn, .units = units};
	}
	prof[i].n++;
	prof[i].total += t2 - t0;
	prof[i].wait += t2 - t1;
	prof[i].work += work;
	prof[i].late += late, prof[i].busy += busy, prof[i].workers += workers;
}

// The gaps between passes: the caller's time from one pass's end to the
// next one's start, keyed by the two passes' tasks and units. That time
// is the serial work of a step (Go code, calls made on the caller alone,
// the optimizer, the data), which more threads do not shorten; the pair
// of passes around it says where in the step it runs. The first pass
// after k_pass_profile has no gap; a step's first pass gets the time
// since the last pass of the step before.
#define GAP_MAX 256
struct k_pass_gap {
	task_fn from, to;
	size_t from_units, to_units;
	unsigned long n;
	double time;
};
static struct k_pass_gap gaps[GAP_MAX];
static int ngaps;
static task_fn gap_fn;
static size_t gap_units;
static double gap_end; // the last pass's end, 0 for none

// prof_gap records the gap before a pass that ran from start to end
// (entries past GAP_MAX are dropped and counted in the last).
static void prof_gap(task_fn fn, size_t units, double start, double end) {
	if (gap_end > 0) {
		int i = 0;
		while (i < ngaps && !(gaps[i].from == gap_fn && gaps[i].from_units == gap_units && gaps[i].to == fn &&
		                      gaps[i].to_units == units))
			i++;
		if (i == ngaps) {
			if (ngaps == GAP_MAX) i = GAP_MAX - 1;
			else gaps[ngaps++] = (struct k_pass_gap){gap_fn, fn, gap_units, units, 0, 0};
		}
		gaps[i].n++;
		gaps[i].time += start - gap_end;
	}
	gap_fn = fn, gap_units = units, gap_end = end;
}

// ---- T threads simulated on one (train bench step --simulate-threads) ----
//
// A rank's speed-up at T threads is bounded by how its passes are cut:
// a pass of fewer units than threads, or of units of unequal time, leaves
// threads idle however fast they wake. The simulation cuts every pass as
// for sim_T threads (nthreads is sim_T: the same parts, wide passes, row
// blocks and own kernels as a pool of sim_T) and runs its chunks on the
// caller one at a time, each as the simulated thread that the pool's
// schedule gives it next (run_chunks: its own share in order, then the
// others' next free chunk): the simulated thread with the earliest clock
// takes its next chunk, which runs now, as that thread (its scratch, its
// own kernels), and its time moves that thread's clock. A pass's time at
// sim_T threads is then its latest clock. What the simulation leaves out
// makes a real pool slower: waking the workers, the cores sharing memory
// and the last-level cache, a chunk reading what another core wrote.
// One thing cuts the other way: every simulated thread's data goes
// through this one core's caches, where real threads have their own (at
// 2 threads on a Cascade Lake, real runs gave 726 and 607 samples/s of
// ResNet-20 where the simulation said 696 and 659). So it bounds the
// cut, not the caches.

// k_simulate_threads cuts the passes as for T threads and runs them on
// the caller (T <= 1: off, back to the pool's own size). It fails (-1)
// for T above MAXT.
int k_simulate_threads(int T) {
	static int pool;
	if (T > MAXT) return -1;
	pthread_mutex_lock(&busy);
	if (!sim_T) pool = nthreads;
	sim_T = T > 1 ? T : 0;
	nthreads = T > 1 ? T : pool;
	pthread_mutex_unlock(&busy);
	return 0;
}

// sim_chunks is run_chunks for T simulated threads (above); the pass
// goes into the profile (when on) with its simulated time, and its
// tail: the simulated caller's last chunk to the last thread's.
static void sim_chunks(size_t units, size_t chunk, int T, task_fn fn, void *ctx) {
	size_t n = (units + chunk - 1) / chunk, next[MAXT], end[MAXT];
	double clock[MAXT], t0done = 0, span = 0, start = prof_now();
	char done[MAXT];
	for (int w = 0; w < T; w++) next[w] = w * n / T, end[w] = (w + 1) * n / T, clock[w] = 0, done[w] = 0;
	for (;;) {
		int w = -1;
		for (int i = 0; i < T; i++)
			if (!done[i] && (w < 0 || clock[i] < clock[w])) w = i;
		if (w < 0) break;
		size_t c = SIZE_MAX;
		for (int i = 0; i < T && c == SIZE_MAX; i++) {
			int s = (w + i) % T;
			if (next[s] < end[s]) c = next[s]++;
		}
		if (c == SIZE_MAX) {
			done[w] = 1;
			if (w == 0) t0done = clock[0];
			continue;
		}
		size_t lo = c * chunk;
		double a = prof_now();
		fn(ctx, lo, lo + chunk < units ? lo + chunk : units, w);
		double t = prof_now() - a;
		clock[w] += t;
		if (clock[w] > span) span = clock[w];
	}
	// Its work: the whole pass here, this schedule's own time included, so
	// that the step's time outside the passes is what it is without it.
	if (prof_on) {
		double end = prof_now(), units_time = 0;
		for (int w = 0; w < T; w++) units_time += clock[w];
		prof_add(fn, units, 0, t0done, span, end - start, 0, units_time, 0);
		prof_gap(fn, units, start, end);
	}
}

// k_pass_profile empties the profile and turns it on or off (called
// between steps, from the training goroutine, as the passes are).
void k_pass_profile(int on) {
	pthread_mutex_lock(&busy);
	nprof = 0;
	ngaps = 0;
	gap_end = 0;
	prof_on = on;
	pthread_mutex_unlock(&busy);
}

// k_pass_profile_entry reads entry i; it returns 0 past the last.
int k_pass_profile_entry(int i, void **fn, size_t *units, unsigned long *n, double *total, double *wait,
                         double *work, double *late, double *busy, unsigned long *workers) {
	if (i < 0 || i >= nprof) return 0;
	*fn = (void *)prof[i].fn, *units = prof[i].units, *n = prof[i].n;
	*total = prof[i].total, *wait = prof[i].wait, *work = prof[i].work;
	*late = prof[i].late, *busy = prof[i].busy, *workers = prof[i].workers;
	return 1;
}

// k_pass_gap_entry reads gap i (above); it returns 0 past the last.
int k_pass_gap_entry(int i, void **from, size_t *from_units, void **to, size_t *to_units, unsigned long *n,
                     double *time) {
	if (i < 0 || i >= ngaps) return 0;
	*from = (void *)gaps[i].from, *from_units = gaps[i].from_units, *to = (void *)gaps[i].to;
	*to_units = gaps[i].to_units, *n = gaps[i].n, *time = gaps[i].time;
	return 1;
}

// run_chunks runs fn(ctx, lo, hi, w) on chunks of chunk contiguous units
// of [0, units) across the pool, the caller too. Thread w of T owns the
// w-th of T equal shares of the chunks and takes its own in order, then
// the others' next free ones.
// - Owned shares keep a thread on the same part of the data from pass to
//   pass: nearly every pass cuts the batch into units in image order, so
//   thread w mostly reads what it wrote itself, from its own caches. A
//   cache line's round trip between this machine's two cores costs about
//   500 ns. Against every thread taking the next free chunk of one
//   counter (which also bounced that counter between the cores at every
//   chunk): ResNet-20 at one rank of 2 threads 1.19x, 8 of 8 paired
//   rounds faster; the GPT 1.017x, 4 of 4.
// - Taking the others' chunks when its own are done, rather than stopping
//   at its share, a thread that starts late (a worker woken from its
//   futex) or runs slower (a core shared with another process) does less
//   instead of making the others wait for it (perf, fixed shares alone:
//   the caller waited 2% of a 2-thread ResNet-20 step inside the
//   Winograd passes).
// A unit writes only its own outputs (every reduction sums per-unit parts
// in unit order), so which thread runs it changes no bits. Tasks must
// not call run.
static void run_chunks(size_t units, size_t chunk, task_fn fn, void *ctx) {
	if (units == 0) return;
	pthread_mutex_lock(&busy);
	int pon = prof_on; // read once: the profile may be turned off during the pass
	double t0 = pon ? prof_now() : 0, t1 = t0;
	int T = (size_t)nthreads < units ? nthreads : (int)units;
	if (sim_T && T > 1) {
		sim_chunks(units, chunk, T, fn, ctx);
		pthread_mutex_unlock(&busy);
		return;
	}
	if (T <= 1 || created == 0) {
		fn(ctx, 0, units, 0);
		if (pon) t1 = prof_now(), prof_add(fn, units, t0, t1, t1, t1 - t0, 0, t1 - t0, 0), prof_gap(fn, units, t0, t1);
		pthread_mutex_unlock(&busy);
		return;
	}
	cur.fn = fn, cur.ctx = ctx, cur.units = units, cur.T = T;
	cur.chunk = chunk;
	size_t n = (units + chunk - 1) / chunk;
	for (int w = 0; w < T; w++) {
		atomic_store_explicit(&shares[w].next, w * n / T, memory_order_relaxed);
		shares[w].end = (w + 1) * n / T;
	}
	cur.prof = pon;
	double go = pon ? prof_now() : 0; // the pass's start, for the workers' delays
	unsigned g = atomic_fetch_add(&cur.gen, 1) + 1;
	if (atomic_load(&gen_sleepers)) fwake(&cur.gen);
	if (pon) ptimes[0].start = prof_now();
	take(0);
	if (pon) t1 = prof_now();
	// Every worker, those past T too (they read cur before they knew).
	struct spinner sp = {0};
	for (int w = 1; w <= created;) {
		if (atomic_load(&finished[w].gen) == g) {
			w++;
			continue;
		}
		if (spinning(&sp)) continue;
		unsigned seq = atomic_load(&ends.seq);
		atomic_store(&ends.sleeper, 1);
		if (atomic_load(&finished[w].gen) != g) fwait(&ends.seq, seq);
		atomic_store(&ends.sleeper, 0);
	}
	if (pon) {
		double end = prof_now(), late = 0, busyt = t1 - ptimes[0].start;
		for (int w = 1; w < T; w++) late += ptimes[w].start - go, busyt += ptimes[w].end - ptimes[w].start;
		prof_add(fn, units, t0, t1, end, 0, late, busyt, (unsigned long)(T - 1));
		prof_gap(fn, units, t0, end);
	}
	pthread_mutex_unlock(&busy);
}

// run is run_chunks one unit at a time: the units of the passes below
// are already sized to be worth a call each (a part of a batch in cache,
// a block of rows).
static void run(size_t units, task_fn fn, void *ctx) { run_chunks(units, 1, fn, ctx); }

// k_run is a pass for the kernels of other files (gemm_amx.c), and
// k_pool_size the threads its units are cut for (the simulated count in
// a simulation).
void k_run(size_t units, k_task fn, void *ctx) { run(units, fn, ctx); }
int k_pool_size(void) { return sim_T ? sim_T : nthreads; }

// ---- per-worker scratch and the parts of reductions (grown, kept) ----

// lines is malloc for the passes' buffers, on cache-line boundaries:
// glibc's large blocks start 16 bytes past a page, so every 64-byte
// vector load and store into one would straddle two lines, and two
// threads writing neighbouring units of one buffer would share the line
// between them.
static void *lines(size_t bytes) {
	void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
	if (!p) abort();
	return p;
}

// kept is a buffer the passes grow and keep (contents dropped when it
// grows), so that steps allocate only while the sizes they see grow.
struct kept {
	void *p;
	size_t cap;
};

static void *keep(struct kept *k, size_t bytes) {
	if (k->cap < bytes) {
		free(k->p);
		k->p = lines(bytes);
		k->cap = bytes;
	}
	return k->p;
}

static struct kept scr[MAXT];

// scratch is worker w's buffer of n floats (only w calls it).
static float *scratch(int w, size_t n) { return keep(&scr[w], n * sizeof(float)); }

static struct kept parts;

// partials is the caller's buffer for the parts of one reduction. It
// and the passes are for one goroutine at a time (the training one).
static void *partials(size_t bytes) { return keep(&parts, bytes); }

// ---- element-wise passes, cut into rows ----

// GRAIN is the fewest values a part of an element-wise pass holds:
// below it, waking another thread costs more than it saves.
#define GRAIN 16384

static size_t rows_each(size_t c) { return c >= GRAIN ? 1 : GRAIN / (c ? c : 1); }

// ew carries one pass's arguments to its tasks; u is the rows per part.
struct ew {
	float *y;
	const float *a, *b, *x, *dy, *mean, *scale, *beta, *k;
	const float *z, *zmean, *zscale, *zbeta; // k_join's shortcut
	size_t rows, C, u;
	int relu;
	double *s; // reductions: the parts' sums, 2C each
};

// ROWS sets r0, r1: the rows of parts [lo, hi).
#define ROWS(e)                                     \
	size_t r0 = lo * (e)->u, r1 = hi * (e)->u; \
	if (r1 > (e)->rows) r1 = (e)->rows;        \
	(void)w

static void ew_run(struct ew *e, size_t rows, size_t C, task_fn fn) {
	e->rows = rows, e->C = C;
	if (!e->u) e->u = rows_each(C);
	run((rows + e->u - 1) / e->u, fn, e);
}

static void t_affine(void *p, size_t lo, size_t hi, int w) {
	struct ew *e = p;
	ROWS(e);
	size_t C = e->C;
	k_affine(e->y + r0 * C, e->x + r0 * C, e->mean, e->scale, e->beta, r1 - r0, C, e->relu);
}

void k_affine_par(float *y, const float *x, const float *mean, const float *scale, const float *beta, size_t rows,
                  size_t C, int relu) {
	struct ew e = {.y = y, .x = x, .mean = mean, .scale = scale, .beta = beta, .relu = relu};
	ew_run(&e, rows, C, t_affine);
}

static void t_join(void *p, size_t lo, size_t hi, int w) {
	struct ew *e = p;
	ROWS(e);
	size_t C = e->C;
	k_join(e->y + r0 * C, e->x + r0 * C, e->mean, e->scale, e->beta, e->z + r0 * C, e->zmean, e->zscale, e->zbeta,
	       r1 - r0, C);
}

void k_join_par(float *y, const float *x, const float *mean, const float *scale, const float *beta, const float *z,
                const float *zmean, const float *zscale, const float *zbeta, size_t rows, size_t C) {
	struct ew e = {.y = y, .x = x, .mean = mean, .scale = scale, .beta = beta, .z = z, .zmean = zmean, .zscale = zscale,
	               .zbeta = zbeta};
	ew_run(&e, rows, C, t_join);
}

// An average pool (ResNet's global one: the network's last layer before
// the classifier), images across the threads: in Go on the caller's
// thread it was 0.5 ms of a 57 ms ResNet-20 step at one thread, serial
// at any.
struct avg {
	int grad;
	float *y;
	const float *x;
	size_t h, w, C, kh, kw, oh, ow;
	float inv;
};

static void t_avgpool(void *p, size_t lo, size_t hi, int w) {
	struct avg *a = p;
	size_t in = a->h * a->w * a->C, out = a->oh * a->ow * a->C;
	(void)w;
	if (a->grad)
		k_avgpool_dx(a->y + lo * in, a->x + lo * out, hi - lo, a->h, a->w, a->C, a->kh, a->kw, a->oh, a->ow, a->inv);
	else
		k_avgpool(a->y + lo * out, a->x + lo * in, hi - lo, a->h, a->w, a->C, a->kh, a->kw, a->oh, a->ow, a->inv);
}

// k_avgpool_par runs k_avgpool (grad 0: y the pooled x) or k_avgpool_dx
// (grad 1: y the input gradient, x the pooled gradient) over n images.
void k_avgpool_par(int grad, float *y, const float *x, size_t n, size_t h, size_t w, size_t C, size_t kh, size_t kw,
                   size_t oh, size_t ow, float inv) {
	struct avg a = {grad, y, x, h, w, C, kh, kw, oh, ow, inv};
	size_t per = h * w * C;
	run_chunks(n, per >= GRAIN ? 1 : GRAIN / per, t_avgpool, &a);
}

static void t_bn_dx(void *p, size_t lo, size_t hi, int w) {
	struct ew *e = p;
	ROWS(e);
	size_t C = e->C;
	k_bn_dx(e->y + r0 * C, e->dy + r0 * C, e->x + r0 * C, r1 - r0, C, e->mean, e->a, e->b, e->k, e->scale, e->beta,
	        e->relu);
}

void k_bn_dx_par(float *dx, const float *dy, const float *x, size_t rows, size_t C, const float *mean, const float *a,
                 const float *b, const float *k, const float *scale, const float *beta, int relu) {
	struct ew e = {.y = dx, .dy = dy, .x = x, .mean = mean, .a = a, .b = b, .k = k, .scale = scale, .beta = beta,
	               .relu = relu};
	ew_run(&e, rows, C, t_bn_dx);
}

// Flat passes over n values (rows of one): kernels of the shape
// f(out, in1, in2, n).
typedef void (*flat_fn)(float *, const float *, const float *, size_t);

struct flat {
	flat_fn f;
	float *y;
	const float *a, *b;
	size_t n;
};

static void t_flat(void *p, size_t lo, size_t hi, int w) {
	struct flat *e = p;
	size_t r0 = lo * GRAIN, r1 = hi * GRAIN < e->n ? hi * GRAIN : e->n;
	(void)w;
	e->f(e->y + r0, e->a + r0, e->b ? e->b + r0 : NULL, r1 - r0);
}

static void flat_run(flat_fn f, float *y, const float *a, const float *b, size_t n) {
	struct flat e = {f, y, a, b, n};
	run((n + GRAIN - 1) / GRAIN, t_flat, &e);
}

static void gelu1(float *y, const float *x, const float *unused, size_t n) {
	(void)unused;
	k_gelu(y, x, n);
}

void k_relu_mask_par(float *g, const float *dy, const float *y, size_t n) { flat_run(k_relu_mask, g, dy, y, n); }

static void zero1(float *y, const float *unused, const float *unused2, size_t n) {
	(void)unused, (void)unused2;
	memset(y, 0, n * sizeof(float));
}

// k_zero_par sets n values of y to +0 across the threads: a step's
// gradient, which the GPT's 30M parameters made 120 MB cleared on the
// calling thread (Go's clear), about 12 ms a step at any thread count.
void k_zero_par(float *y, size_t n) { flat_run(zero1, y, y, NULL, n); }

// ---- other packages' element-wise passes (optim's updates) ----

struct ranges {
	k_range_fn fn;
	void *ctx;
	size_t n, parts;
	float *out; // one result a part
};

static void t_update(void *p, size_t lo, size_t hi, int w) {
	struct ranges *r = p;
	(void)w;
	for (size_t u = lo; u < hi; u++) r->out[u] = r->fn(r->ctx, r->n * u / r->parts, r->n * (u + 1) / r->parts);
}

// k_pool_ranges runs fn(ctx, lo, hi) over [0, n) cut into equal parts of
// at least grain values, at most one a thread, as a pass of this pool,
// and returns the parts' results added in part order. It is for code
// outside this package (optim's updates), which gets it as a function
// pointer (model.PoolRanges): the rank's one pool, whose threads are
// spinning from the backward's last pass when the update comes, rather
// than a second set of threads beside it. fn must treat each value on
// its own (the cut depends on the thread count).
float k_pool_ranges(size_t n, size_t grain, k_range_fn fn, void *ctx) {
	size_t parts = grain ? n / grain : n;
	if (parts > (size_t)nthreads) parts = (size_t)nthreads;
	if (parts < 1) parts = 1;
	if (parts == 1) return fn(ctx, 0, n);
	// On this stack, not partials(): a parameter server's goroutine may
	// update while the training one's passes run (run takes turns).
	float out[MAXT];
	struct ranges r = {fn, ctx, n, parts, out};
	run(parts, t_update, &r);
	float sum = 0;
	for (size_t u = 0; u < parts; u++) sum += r.out[u];
	return sum;
}

struct scale {
	float *y;
	size_t n;
	float c;
};

static void t_scale(void *p, size_t lo, size_t hi, int w) {
	struct scale *e = p;
	size_t r1 = hi * GRAIN < e->n ? hi * GRAIN : e->n;
	(void)w;
	for (size_t i = lo * GRAIN; i < r1; i++) e->y[i] *= e->c;
}

// k_scale_par multiplies n values of y by c across the threads, each
// value's own float product (any cut, the same bits): a loss gradient
// shared by micro-batches, the GPT's logits' 51M values a step that Go
// scaled on the calling thread.
void k_scale_par(float *y, size_t n, float c) {
	struct scale e = {y, n, c};
	run((n + GRAIN - 1) / GRAIN, t_scale, &e);
}

struct perm_chw {
	float *dst;
	const float *src;
	size_t c, hw;
	int to_hwc;
};

static void t_permute_chw(void *p, size_t lo, size_t hi, int w) {
	const struct perm_chw *q = p;
	size_t c = q->c, hw = q->hw, size = c * hw;
	(void)w;
	for (size_t b = lo; b < hi; b++) {
		const float *s = q->src + b * size;
		float *d = q->dst + b * size;
		for (size_t ch = 0; ch < c; ch++)
			for (size_t i = 0; i < hw; i++) {
				if (q->to_hwc)
					d[i * c + ch] = s[ch * hw + i];
				else
					d[ch * hw + i] = s[i * c + ch];
			}
	}
}

// k_permute_chw_par moves n samples between (c, hw) and (hw, c) order
// (to_hwc: into (hw, c)), the samples across the threads: the network's
// input arrives NCHW and ran through Go on the caller, a CIFAR batch of
// 64 in a few hundred microseconds and an ImageNet batch in milliseconds,
// ahead of every thread.
void k_permute_chw_par(float *dst, const float *src, size_t n, size_t c, size_t hw, int to_hwc) {
	struct perm_chw q = {dst, src, c, hw, to_hwc};
	size_t per = c * hw, chunk = per >= GRAIN ? 1 : GRAIN / per;
	run_chunks(n, chunk, t_permute_chw, &q);
}

static void copy1(float *y, const float *x, const float *unused, size_t n) {
	(void)unused;
	memcpy(y, x, n * sizeof(float));
}

// k_copy_par copies n values of x to y across the threads: the GPT's
// residual gradient (1.5 MB a copy at its bench size, twice a layer)
// took 0.3 to 0.6 ms each on the caller, between passes.
void k_copy_par(float *y, const float *x, size_t n) { flat_run(copy1, y, x, NULL, n); }

struct fill {
	float *y;
	const float *b;
	size_t rows, c, per;
};

static void t_fill_rows(void *p, size_t lo, size_t hi, int w) {
	struct fill *f = p;
	size_t r1 = hi * f->per < f->rows ? hi * f->per : f->rows;
	(void)w;
	for (size_t r = lo * f->per; r < r1; r++) memcpy(f->y + r * f->c, f->b, f->c * sizeof(float));
}

// k_fill_rows_par sets every one of rows rows of y (rows, c) to b (c)
// across the threads: a linear layer's bias, which its product then adds
// onto (beta 1, so the bits are the product's with the bias as C's
// start). On the caller it wrote 1.5 to 6 MB a layer of the GPT, 0.15 to
// 0.8 ms each, between passes.
void k_fill_rows_par(float *y, const float *b, size_t rows, size_t c) {
	struct fill f = {y, b, rows, c, rows_each(c)};
	run((rows + f.per - 1) / f.per, t_fill_rows, &f);
}

static void t_add_rows(void *p, size_t lo, size_t hi, int w) {
	struct fill *f = p;
	size_t r1 = hi * f->per < f->rows ? hi * f->per : f->rows;
	(void)w;
	for (size_t r = lo * f->per; r < r1; r++) k_add(f->y + r * f->c, f->y + r * f->c, f->b, f->c);
}

// k_add_rows_par adds b (c) onto every one of rows rows of y (rows, c)
// across the threads: a row-split (tensor-parallel) linear layer's bias,
// added after the shards' outputs are summed. It was one k_add_par call
// a row from Go (1,024 a layer at the bench's size, each under a pass's
// grain, so all on the caller).
void k_add_rows_par(float *y, const float *b, size_t rows, size_t c) {
	struct fill f = {y, b, rows, c, rows_each(c)};
	run((rows + f.per - 1) / f.per, t_add_rows, &f);
}

void k_add_par(float *y, const float *a, const float *b, size_t n) { flat_run(k_add, y, a, b, n); }
void k_gelu_par(float *y, const float *x, size_t n) { flat_run(gelu1, y, x, NULL, n); }
void k_gelu_backward_par(float *dx, const float *dy, const float *x, size_t n) {
	flat_run(k_gelu_backward, dx, dy, x, n);
}

// ---- LayerNorm and a linear layer's bias gradient ----
//
// The GPT's LayerNorms and bias sums ran on the calling thread: about 1.2%
// of a one-thread step in `perf` (k_layernorm_backward 0.59, k_colsum
// 0.39, k_layernorm 0.23), which no thread count shortened. Rows are
// independent (the forward, the input gradient); the parameter sums are
// cut by columns instead, each column summed over the rows in row order
// as the one-thread loop does, so the bits are that loop's at any thread
// count (TestLayerNormParSameBits). The backward's two passes read dy
// and x twice, so one thread (no pool, and no simulated one) keeps the
// fused loop.

// LN_COLS: the columns of a part of a column pass, a cache line of floats.
#define LN_COLS 16

// spread is the chunk of units that gives each of the pool's threads
// one, for passes whose units are rows of a small weight permuted or
// added elementwise (the same bits at any cut): serial on the caller
// they were tens of microseconds a layer ahead of every thread.
static size_t spread(size_t units) {
	size_t T = (size_t)nthreads;
	return T > 1 ? (units + T - 1) / T : units;
}

// cols_pass runs fn over the LN_COLS-column units of C columns, one
// contiguous chunk of them a thread. A unit alone read one cache line of
// every row, C floats apart: a page a row for the MLP's 1,536-wide
// bias, which the hardware prefetcher does not cross, so every row was a
// miss (t_ln_sums, the LayerNorms' and biases' sums, 14 ms a step of
// the GPT at 2 threads, 7 times LayerNorm's forward). A chunk reads C / T
// floats of each row. Each column is still summed over the rows in row
// order, so any cut gives the same bits.
static void cols_pass(size_t C, task_fn fn, void *ctx) {
	size_t units = (C + LN_COLS - 1) / LN_COLS;
	run_chunks(units, spread(units), fn, ctx);
}

struct ln {
	float *y, *mean, *rstd, *dx, *dw, *db;
	const float *x, *w, *b, *dy, *cmean, *crstd;
	size_t rows, C, u;
	float eps;
	int add;
};

static void t_ln_fwd(void *p, size_t lo, size_t hi, int w) {
	struct ln *e = p;
	ROWS(e);
	k_layernorm(e->y + r0 * e->C, e->mean + r0, e->rstd + r0, e->x + r0 * e->C, e->w, e->b, r1 - r0, e->C, e->eps);
}

static void t_ln_dx(void *p, size_t lo, size_t hi, int w) {
	struct ln *e = p;
	ROWS(e);
	size_t o = r0 * e->C;
	k_layernorm_backward(e->dx + o, NULL, NULL, e->dy + o, e->x + o, e->w, e->cmean + r0, e->crstd + r0, r1 - r0, e->C,
	                     e->add);
}

static void t_ln_sums(void *p, size_t lo, size_t hi, int w) {
	struct ln *e = p;
	size_t c1 = hi * LN_COLS < e->C ? hi * LN_COLS : e->C;
	(void)w;
	if (e->dw)
		k_layernorm_sums(e->dw, e->db, e->dy, e->x, e->cmean, e->crstd, e->rows, e->C, lo * LN_COLS, c1);
	else
		k_colsum_cols(e->db, e->dy, e->rows, e->C, lo * LN_COLS, c1);
}

void k_layernorm_par(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b,
                     size_t rows, size_t C, float eps) {
	struct ln e = {.y = y, .mean = mean, .rstd = rstd, .x = x, .w = w, .b = b, .rows = rows, .C = C, .eps = eps,
	               .u = rows_each(C)};
	run((rows + e.u - 1) / e.u, t_ln_fwd, &e);
}

void k_layernorm_backward_par(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                              const float *mean, const float *rstd, size_t rows, size_t C, int add) {
	if (nthreads <= 1) {
		k_layernorm_backward(dx, dw, db, dy, x, w, mean, rstd, rows, C, add);
		return;
	}
	struct ln e = {.dx = dx, .dw = dw, .db = db, .dy = dy, .x = x, .w = w, .cmean = mean, .crstd = rstd,
	               .rows = rows, .C = C, .add = add, .u = rows_each(C)};
	if (dx) run((rows + e.u - 1) / e.u, t_ln_dx, &e);
	cols_pass(C, t_ln_sums, &e);
}

void k_colsum_par(float *db, const float *dy, size_t rows, size_t C) {
	if (nthreads <= 1) {
		k_colsum(db, dy, rows, C);
		return;
	}
	struct ln e = {.db = db, .dy = dy, .rows = rows, .C = C};
	cols_pass(C, t_ln_sums, &e);
}

// ---- the GPT's embedding: rows forward, columns backward ----
//
// Both ran on the caller between passes, about 0.5 ms each a step of
// the bench's GPT. The backward adds rows into the table rows their
// tokens name (a token used twice gets both, in row order), so it is
// cut by columns (LN_COLS a part), each column still summed in row
// order: the same bits at any thread count.

struct emb {
	float *y, *dwte, *dwpe;
	const float *ids, *wte, *wpe, *dy;
	size_t rows, T, C, u;
};

static void t_embed(void *p, size_t lo, size_t hi, int w) {
	struct emb *e = p;
	size_t r1 = hi * e->u < e->rows ? hi * e->u : e->rows;
	(void)w;
	k_embed_rows(e->y, e->ids, e->wte, e->wpe, lo * e->u, r1, e->T, e->C);
}

static void t_embed_backward(void *p, size_t lo, size_t hi, int w) {
	struct emb *e = p;
	size_t c1 = hi * LN_COLS < e->C ? hi * LN_COLS : e->C;
	(void)w;
	k_embed_backward_cols(e->dwte, e->dwpe, e->dy, e->ids, e->rows, e->T, e->C, lo * LN_COLS, c1);
}

void k_embed_par(float *y, const float *ids, const float *wte, const float *wpe, size_t rows, size_t T, size_t C) {
	struct emb e = {.y = y, .ids = ids, .wte = wte, .wpe = wpe, .rows = rows, .T = T, .C = C, .u = rows_each(C)};
	run((rows + e.u - 1) / e.u, t_embed, &e);
}

void k_embed_backward_par(float *dwte, float *dwpe, const float *dy, const float *ids, size_t rows, size_t T,
                          size_t C) {
	if (nthreads <= 1) { // one pass over dy's rows, not one per column block
		k_embed_backward(dwte, dwpe, dy, ids, rows, T, C);
		return;
	}
	struct emb e = {.dwte = dwte, .dwpe = dwpe, .dy = dy, .ids = ids, .rows = rows, .T = T, .C = C};
	cols_pass(C, t_embed_backward, &e);
}

// ---- the cross-entropy over wide rows: parts by shape ----

struct xent {
	float *d;
	const float *logits;
	const int32_t *labels;
	size_t rows, V, per;
	float scale;
	double *loss;     // one per part
	int64_t *correct; // one per part
};

static void t_xent(void *p, size_t lo, size_t hi, int w) {
	struct xent *x = p;
	(void)w;
	for (size_t u = lo; u < hi; u++) {
		size_t r0 = u * x->per, r1 = r0 + x->per < x->rows ? r0 + x->per : x->rows;
		x->loss[u] = 0, x->correct[u] = 0;
		k_xent(x->d ? x->d + r0 * x->V : NULL, x->logits + r0 * x->V, x->labels + r0, r1 - r0, x->V, x->scale,
		       &x->loss[u], &x->correct[u]);
	}
}

// k_xent_par is k_xent across the threads: rows cut into at most 16
// parts by the shape alone, the parts' losses added in part order.
void k_xent_par(float *d, const float *logits, const int32_t *labels, size_t rows, size_t V, float scale,
                double *loss, int64_t *correct) {
	size_t per = (rows + 15) / 16, min = rows_each(V);
	per = per > min ? per : min;
	size_t units = (rows + per - 1) / per;
	double *ps = partials(units * (sizeof(double) + sizeof(int64_t)));
	struct xent x = {d, logits, labels, rows, V, per, scale, ps, (int64_t *)(ps + units)};
	run(units, t_xent, &x);
	for (size_t u = 0; u < units; u++) *loss += x.loss[u], *correct += x.correct[u];
}

// ---- causal attention: a unit per sample and head ----
//
// Each (sample, head) is its own products (in row blocks, ABLOCK below)
// and its softmax, as model/attention.go did them one after another:
// there, each product (T x T x hd at the GPT's T = 256, hd = 64) was cut
// across at most 3 threads and the softmax ran on one, so at 16 threads
// attention was a serial island. A unit computes the whole of its
// products with k_sgemm1, which are k_sgemm's bits (its cuts are chosen
// to keep them), and writes only its head's columns and its
// probabilities.

struct attn {
	const float *qkv, *dout;
	float *o, *p, *dqkv;
	size_t t, c, hd, heads;
	float scale;
};

// ABLOCK: the rows of a block of the causal products. Row i attends to
// positions j <= i only, so a block of rows [r0, r1) needs the scores of
// columns [0, r1) and its output the probabilities and values there:
// with 4 blocks of 64 at the GPT's T = 256, 10/16 of the full products
// (the upper triangle of zeros is skipped, not multiplied). The backward
// takes the same triangle: dV's and dK's rows [r0, r1) sum over the
// positions i >= r0. Each unit is one thread's calls, fixed by the shape:
// the same bits at any thread count.
#define ABLOCK 64

static void t_attn_fwd(void *pp, size_t lo, size_t hi, int w) {
	struct attn *a = pp;
	size_t t = a->t, c = a->c, hd = a->hd, c3 = 3 * c;
	(void)w;
	for (size_t u = lo; u < hi; u++) {
		size_t s = u / a->heads, h = u % a->heads;
		const float *q = a->qkv + s * t * c3 + h * hd, *k = q + c, *v = q + 2 * c;
		float *p = a->p + u * t * t, *o = a->o + s * t * c + h * hd;
		// scores (T, T) = q k^T / sqrt(hd), for j < r1 in the rows of a
		// block (the softmax reads j <= i and zeroes the rest of the row).
		for (size_t r0 = 0; r0 < t; r0 += ABLOCK) {
			size_t r1 = r0 + ABLOCK < t ? r0 + ABLOCK : t;
			k_sgemm1(0, 1, r1 - r0, r1, hd, a->scale, q + r0 * c3, c3, k, c3, 0, p + r0 * t, t);
		}
		k_causal_softmax(p, t);
		for (size_t r0 = 0; r0 < t; r0 += ABLOCK) {
			size_t r1 = r0 + ABLOCK < t ? r0 + ABLOCK : t;
			k_sgemm1(0, 0, r1 - r0, hd, r1, 1, p + r0 * t, t, v, c3, 0, o + r0 * c, c);
		}
	}
}

// k_attention_forward_par: for n samples of qkv (T, 3C), each head's
// probabilities into p (n, heads, T, T) and its output into o (n, T, C).
void k_attention_forward_par(const float *qkv, float *o, float *p, size_t n, size_t t, size_t c, size_t heads,
                             float scale) {
	struct attn a = {.qkv = qkv, .o = o, .p = p, .t = t, .c = c, .hd = c / heads, .heads = heads, .scale = scale};
	run(n * heads, t_attn_fwd, &a);
}

static void t_attn_bwd(void *pp, size_t lo, size_t hi, int w) {
	struct attn *a = pp;
	size_t t = a->t, c = a->c, hd = a->hd, c3 = 3 * c;
	float *dp = scratch(w, t * t);
	for (size_t u = lo; u < hi; u++) {
		size_t s = u / a->heads, h = u % a->heads;
		const float *q = a->qkv + s * t * c3 + h * hd, *k = q + c, *v = q + 2 * c;
		float *dq = a->dqkv + s * t * c3 + h * hd, *dk = dq + c, *dv = dq + 2 * c;
		const float *dO = a->dout + s * t * c + h * hd, *p = a->p + u * t * t;
		// dV = P^T dO, its rows [r0, r1) from positions i >= r0; dP = dO V^T
		// for j < r1 (the softmax's backward reads j <= i and zeroes the
		// rest of the row).
		for (size_t r0 = 0; r0 < t; r0 += ABLOCK) {
			size_t r1 = r0 + ABLOCK < t ? r0 + ABLOCK : t;
			k_sgemm1(1, 0, r1 - r0, hd, t - r0, 1, p + r0 * t + r0, t, dO + r0 * c, c, 0, dv + r0 * c3, c3);
			k_sgemm1(0, 1, r1 - r0, r1, hd, 1, dO + r0 * c, c, v, c3, 0, dp + r0 * t, t);
		}
		k_causal_softmax_backward(dp, p, t, a->scale);
		// dQ = dS K over j < r1; dK = dS^T Q over i >= r0.
		for (size_t r0 = 0; r0 < t; r0 += ABLOCK) {
			size_t r1 = r0 + ABLOCK < t ? r0 + ABLOCK : t;
			k_sgemm1(0, 0, r1 - r0, hd, r1, 1, dp + r0 * t, t, k, c3, 0, dq + r0 * c3, c3);
			k_sgemm1(1, 0, r1 - r0, hd, t - r0, 1, dp + r0 * t + r0, t, q + r0 * c3, c3, 0, dk + r0 * c3, c3);
		}
	}
}

// k_attention_backward_par: with P the probabilities and dO (n, T, C) the
// heads' output gradient, dV = P^T dO, dP = dO V^T, dS = P (dP -
// rowsum(P dP)) / sqrt(hd), dQ = dS K, dK = dS^T Q, into dqkv (n, T, 3C).
void k_attention_backward_par(float *dqkv, const float *dout, const float *qkv, const float *p, size_t n, size_t t,
                              size_t c, size_t heads, float scale) {
	struct attn a = {.qkv = qkv,
	                 .dout = dout,
	                 .p = (float *)p,
	                 .dqkv = dqkv,
	                 .t = t,
	                 .c = c,
	                 .hd = c / heads,
	                 .heads = heads,
	                 .scale = scale};
	run(n * heads, t_attn_bwd, &a);
}

// ---- BatchNorm's sums: parts by shape, summed in part order ----

// MAXPARTS bounds how finely a batch is cut: enough parts to balance 16
// threads, and no more, so that parts stay big.
#define MAXPARTS 16

// add_parts adds units parts of n sums each to s, in part order.
static void add_parts(double *s, const double *parts, size_t units, size_t n) {
	for (size_t u = 0; u < units; u++)
		for (size_t i = 0; i < n; i++) s[i] += parts[u * n + i];
}

// bn_part_rows is sum_parts' rows per part.
static size_t bn_part_rows(size_t rows, size_t C) {
	size_t per = (rows + MAXPARTS - 1) / MAXPARTS, min = rows_each(C);
	per = per > min ? per : min;
	return (per + 31) / 32 * 32;
}

// sum_parts cuts rows into parts of per rows (0: bn_part_rows', at most
// MAXPARTS parts of whole 32-row blocks, by the shape alone), runs fn on
// each with its own 2C sums cleared, and adds the parts' sums to s in
// part order.
static void sum_parts(struct ew *e, size_t rows, size_t C, double *s, task_fn fn, size_t per) {
	if (!per) per = bn_part_rows(rows, C);
	size_t units = (rows + per - 1) / per;
	e->s = partials(units * 2 * C * sizeof(double));
	memset(e->s, 0, units * 2 * C * sizeof(double));
	e->u = per;
	ew_run(e, rows, C, fn);
	add_parts(s, e->s, units, 2 * C);
}

static void t_bn_stats(void *p, size_t lo, size_t hi, int w) {
	struct ew *e = p;
	size_t C = e->C;
	for (size_t u = lo; u < hi; u++) {
		size_t r0 = u * e->u, r1 = r0 + e->u < e->rows ? r0 + e->u : e->rows;
		k_bn_stats(e->x + r0 * C, r1 - r0, C, e->s + u * 2 * C);
	}
	(void)w;
}

// k_bn_stats_par: per, when not 0, is the rows of a part (a Winograd
// forward's, whose passes can make the same sums: k_wino_forward).
void k_bn_stats_par(const float *x, size_t rows, size_t C, double *s, size_t per) {
	struct ew e = {.x = x};
	sum_parts(&e, rows, C, s, t_bn_stats, per);
}

static void t_bn_grad_sums(void *p, size_t lo, size_t hi, int w) {
	struct ew *e = p;
	size_t C = e->C;
	for (size_t u = lo; u < hi; u++) {
		size_t r0 = u * e->u, r1 = r0 + e->u < e->rows ? r0 + e->u : e->rows;
		k_bn_grad_sums(e->x + r0 * C, e->dy + r0 * C, r1 - r0, C, e->mean, e->a, e->k, e->scale, e->beta, e->relu,
		               e->s + u * 2 * C);
	}
	(void)w;
}

void k_bn_grad_sums_par(const float *x, const float *dy, size_t rows, size_t C, const float *mhi, const float *mlo,
                        const float *invstd, const float *scale, const float *beta, int relu, double *s) {
	struct ew e = {.x = x, .dy = dy, .mean = mhi, .a = mlo, .k = invstd, .scale = scale, .beta = beta, .relu = relu};
	sum_parts(&e, rows, C, s, t_bn_grad_sums, 0);
}

// ---- SGEMM across the threads: blocks of rows of C ----

// k_sgemm cuts a product only into blocks of rows of C whose edges fall
// on multiples of GEMM_BLOCK, each block big enough to take the path
// through OpenBLAS that the whole product takes, so that every element
// comes out with the bits of one whole cblas_sgemm call at any thread
// count. Debian's OpenBLAS 0.3.21 computes an element otherwise once a
// product is cut elsewhere (TestSgemmThreadsSameBits keeps both rules):
//   - Its Haswell kernels (which Zen 1 to 3 run too): blocks of 16, 32 or
//     64 rows, or columns cut anywhere, changed 3% to 30% of the elements
//     of a 1024x1152x384 product. Rows are the columns of OpenBLAS's
//     column-major call, which its driver (driver/level3/level3.c) hands
//     the kernel 12 at a time (3 * SGEMM_DEFAULT_UNROLL_N), and the
//     kernel computes a panel of 12 (m8n12) otherwise than its narrower
//     tails. Rows cut on multiples of 12 changed none.
//   - Its AVX-512 kernels (SkylakeX, Cooperlake), which changed none for
//     rows or columns cut anywhere, give a product of m*n*k at most 1e6
//     to a "small matrix" kernel (the permit of SMALL_MATRIX_OPT): a
//     block below that line, where the whole was above it, changed 9 to
//     292 elements. (Its sgemm_direct, for untransposed products under
//     28*512*512 with beta 0, gave the bits of the usual path in 6
//     shapes, so it needs no line of its own.)
#define GEMM_BLOCK 12
#define BLAS_SMALL 1e6

struct gemm {
	int ta, tb;
	size_t m, n, k, lda, ldb, ldc;
	float alpha, beta;
	const float *a, *b;
	float *c;
	size_t units, parts; // blocks of GEMM_BLOCK rows, shared out evenly
	struct cut *cut;     // or by the threads' speeds (below); NULL: evenly
};

// ---- a product's rows cut by the threads' speeds ----
//
// A product cut into one part a thread (each part packs all of B, so
// finer parts for the threads to share cost more: above) finishes when
// its slowest part does. Threads are not equally fast: a vCPU whose host
// core is busy elsewhere, a hyperthread beside a busy sibling, a hybrid
// CPU's efficiency cores, a worker woken late. On this project's 2-vCPU
// VM the GPT's products at 2 threads waited 50 to 90 ms a step (5 to 9%)
// for the slower part, and the slower thread was the same one as in the
// pass before in 65 to 84% of passes. So each thread's speed is learned
// from the products it ran (its rows over the time from the pass's start
// to its part's end, which counts a late wake-up too, relative to the
// pass's mean) and the next product's rows are cut in proportion.
//
// The cut changes no bits: its edges stay on multiples of GEMM_BLOCK and
// no part falls below the fewest blocks that keep it off the
// small-matrix kernel, the rules under which any cut gives one call's
// bits (above; TestSgemmThreadsSameBits cuts by skewed speeds too). No
// part gets less than half or more than twice its even share, so a
// wrong guess costs at most what a slow thread costs now.
#define SPEED_KEEP 0.75 // an estimate's weight against a new pass's
struct cut {
	size_t at[MAXT + 1]; // part i: blocks [at[i], at[i+1]); rows past the last block: the last part
	double t0, end[MAXT];
	int who[MAXT];
};
static pthread_mutex_t speed_mu = PTHREAD_MUTEX_INITIALIZER;
static double speed[MAXT]; // relative to the threads' mean; 0: not known
static int speed_T;        // the thread count the estimates are for
static int speed_forced;   // a test's speeds (k_gemm_speeds): kept as given

// k_gemm_speeds sets the threads' relative speeds for the cuts that
// follow and stops learning them (NULL: learn again from even), for a
// test.
void k_gemm_speeds(const double *s, int T) {
	pthread_mutex_lock(&speed_mu);
	for (int i = 0; i < MAXT; i++) speed[i] = s && i < T ? s[i] : 0;
	speed_T = s ? T : 0;
	speed_forced = s != NULL;
	pthread_mutex_unlock(&speed_mu);
}

// cut_rows fills c->at for parts parts (one a thread) of units blocks,
// each at least fewest; it returns 0 where it cut evenly, the speeds not
// known for parts threads.
static int cut_rows(struct cut *c, size_t units, size_t parts, size_t fewest) {
	double s[MAXT], sum = 0;
	pthread_mutex_lock(&speed_mu);
	int known = speed_T == (int)parts;
	for (size_t i = 0; known && i < parts; i++) known = speed[i] > 0, s[i] = speed[i];
	pthread_mutex_unlock(&speed_mu);
	if (!known) {
		for (size_t i = 0; i <= parts; i++) c->at[i] = i * units / parts;
		return 0;
	}
	for (size_t i = 0; i < parts; i++) sum += s[i];
	size_t even = units / parts, lo = (even + 1) / 2, hi = 2 * even;
	if (lo < fewest) lo = fewest;
	double acc = 0;
	c->at[0] = 0;
	for (size_t i = 0; i < parts; i++) {
		acc += s[i];
		size_t b = i + 1 == parts ? units : (size_t)(units * acc / sum + 0.5);
		size_t rest = parts - 1 - i; // parts after this one, each in [lo, hi]
		if (b < c->at[i] + lo) b = c->at[i] + lo;
		if (b > c->at[i] + hi) b = c->at[i] + hi;
		if (b + rest * lo > units) b = units - rest * lo;
		if (b + rest * hi < units) b = units - rest * hi;
		c->at[i + 1] = b;
	}
	return 1;
}

// k_cut_rows is cut_rows for a test: the cut the current speeds give
// (k_gemm_speeds), or -1 where it would cut evenly.
int k_cut_rows(size_t units, size_t parts, size_t fewest, size_t *at) {
	struct cut c;
	if (parts < 1 || parts > MAXT || !cut_rows(&c, units, parts, fewest)) return -1;
	memcpy(at, c.at, (parts + 1) * sizeof *at);
	return 0;
}

// learn folds a cut pass's part times into the speeds: only when every
// part ran on its own thread (a part another thread took says nothing
// of its owner).
static void learn(const struct cut *c, const struct gemm *g) {
	double r[MAXT], mean = 0;
	size_t T = g->parts;
	for (size_t i = 0; i < T; i++) {
		double t = c->end[i] - c->t0;
		if (c->who[i] != (int)i || !(t > 0)) return;
		size_t r0 = c->at[i] * GEMM_BLOCK, r1 = i + 1 == T ? g->m : c->at[i + 1] * GEMM_BLOCK;
		r[i] = (double)(r1 - r0) / t;
		mean += r[i] / T;
	}
	pthread_mutex_lock(&speed_mu);
	if (!speed_forced) {
		if (speed_T != (int)T)
			for (size_t i = 0; i < T; i++) speed[i] = 1;
		speed_T = (int)T;
		for (size_t i = 0; i < T; i++) speed[i] = SPEED_KEEP * speed[i] + (1 - SPEED_KEEP) * r[i] / mean;
	}
	pthread_mutex_unlock(&speed_mu);
}

// k_learn_check learns from one pass of a 2-part product of m rows cut
// evenly, whose parts ended t[0] and t[1] seconds after its start on
// threads who[0] and who[1], from speeds not known; it writes the speeds
// learned into s (0: none), for a test.
void k_learn_check(size_t m, const double *t, const int *who, double *s) {
	struct gemm g = {.m = m, .units = m / GEMM_BLOCK, .parts = 2};
	struct cut c = {.t0 = 1};
	c.at[1] = g.units / 2, c.at[2] = g.units;
	for (int i = 0; i < 2; i++) c.end[i] = 1 + t[i], c.who[i] = who[i];
	k_gemm_speeds(NULL, 0);
	learn(&c, &g);
	pthread_mutex_lock(&speed_mu);
	for (int i = 0; i < 2; i++) s[i] = speed_T == 2 ? speed[i] : 0;
	pthread_mutex_unlock(&speed_mu);
	k_gemm_speeds(NULL, 0);
}

// rows_at is the first row of part i: part i has blocks [i*units/parts,
// (i+1)*units/parts) (or the cut's), and the last part the rows past the
// last whole block too.
static size_t rows_at(const struct gemm *g, size_t i) {
	if (i == g->parts) return g->m;
	return (g->cut ? g->cut->at[i] : i * g->units / g->parts) * GEMM_BLOCK;
}

static void t_gemm_rows(void *p, size_t lo, size_t hi, int w) {
	struct gemm *g = p;
	size_t r0 = rows_at(g, lo), r1 = rows_at(g, hi);
	k_sgemm1(g->ta, g->tb, r1 - r0, g->n, g->k, g->alpha, g->a + (g->ta ? r0 : r0 * g->lda), g->lda, g->b, g->ldb,
	         g->beta, g->c + r0 * g->ldc, g->ldc);
	if (g->cut && hi == lo + 1) g->cut->end[lo] = prof_now(), g->cut->who[lo] = w;
}

// Products with a large B and an A much smaller (the GPT's tied head:
// logits = X W^T, W the 77 MB token table) are cut into column blocks of
// COLBLOCK fixed by the shape, at every thread count, and each block's
// rows across the threads: each call then packs only its slice of B. Cut
// by rows alone, each of 2T parts packed all of B again: 32 parts did 2.4
// times the logits' work of one call, 4 parts 1.1 times
// (scripts/bench/head-parts.sh). Fixed by the shape, the blocks keep the
// bits equal at every thread count (an element is one block's call, and
// the rows within a block are cut on multiples of GEMM_BLOCK as above).
#define COLBLOCK 2048
#define BIG_B (4 << 20) // floats of B
// PART_ROWS: the fewest rows of C a part of a product cut by rows gets.
// Each part packs all of B: the MLP's first layer (64 x 784 by 784 x
// 256) cut into 4 parts of 16 rows packed its weights 4 times for 25.7
// MFLOP (the MLP at 2 threads: 2.24x with this floor, ab-step.sh).
#define PART_ROWS 64
// PART_WORK: a product of at least PART_WORK multiply-adds a part may
// still have as many parts as the threads where PART_ROWS leaves fewer,
// down to 2 blocks of rows (24) a part. At 24 rows, packing B again is
// a 24th of a part's multiply-adds. The GPT's weight gradients X^T dY
// have 384 rows (its width): 6 parts of 64, which 16 threads ran only
// 5.5 times faster than one (`train bench step --simulate-threads 16`);
// the MLP's 12.8M multiply-adds stay under the line at any count.
#define PART_WORK (16 << 20)

// ROWCHUNK: the rows of C a unit of a product gets where C has many rows
// and B is small (the GPT's tied head's weight gradient dW = dY^T X:
// 50,257 rows of 384, B the 1024 x 384 activations). Cut one part a
// thread by the learned speeds, its two parts at 2 threads ended 49 ms
// a step apart (19% of the product: the speeds move within a product
// this long, 250 ms); in units of ROWCHUNK rows, which the threads share
// out as they finish (run_chunks), the faster thread takes more. Each
// unit packs B again: 1.5 MB for 1.2 GFLOP of a unit's multiply-adds.
// The units are fixed by the shape (and on multiples of GEMM_BLOCK, far
// above the small-matrix line), so the bits are one call's at every
// thread count.
#define ROWCHUNK 1536
#define SMALL_B (1 << 20) // floats of B

// tile_parts is how many row parts each of blocks column blocks is cut
// into at T threads, at most most (and at least 1): at least 2T units in
// all, to leave room to balance, and then the fewest parts a block whose
// units fill the threads' last round to TILE_FILL. The head's 25 blocks
// cut in 2 at 16 threads made 50 units, 3 rounds and 2 units over: 16
// threads ran the logits 12.6 times faster than one, waiting 23% of the
// pass (`train bench step --simulate-threads 16`). In 3, 75 units fill 5
// rounds to 94%. Each part packs its block's slice of B again: a third
// of the 1,024 rows is 341 multiply-adds a packed value.
#define TILE_FILL 0.9
static size_t tile_parts(size_t blocks, size_t T, size_t most) {
	size_t p = (2 * T + blocks - 1) / blocks, best = p;
	double fill = 0;
	for (size_t q = p; q < p + 4 && q <= most; q++) {
		size_t u = blocks * q, rounds = (u + T - 1) / T;
		double f = (double)u / (double)(rounds * T);
		if (f >= TILE_FILL) return q;
		if (f > fill) fill = f, best = q;
	}
	if (best > most) best = most;
	return best < 1 ? 1 : best;
}

// k_tile_parts is tile_parts for a test.
size_t k_tile_parts(size_t blocks, size_t T, size_t most) { return tile_parts(blocks, T, most); }

// COL_ALIGN: the columns of a block of a product too short to cut by
// rows (cols_plan) come in multiples of this: 64 floats, a multiple of
// every OpenBLAS kernel's unrolling along C's rows in memory, so that
// each element is computed as in one call (TestSgemmThreadsSameBits).
#define COL_ALIGN 64

struct tiles {
	struct gemm g; // g.parts: row parts per column block
	size_t blocks;
	size_t cw; // columns a block (the last has the rest); 0: col_at's
};

// col_at is the first column of block b of blocks over n columns cut
// evenly on multiples of COL_ALIGN (cols_plan), n for b == blocks.
static size_t col_at(size_t b, size_t blocks, size_t n) {
	return b == blocks ? n : b * n / blocks / COL_ALIGN * COL_ALIGN;
}

static void t_gemm_tiles(void *p, size_t lo, size_t hi, int w) {
	struct tiles *t = p;
	const struct gemm *g = &t->g;
	(void)w;
	for (size_t u = lo; u < hi; u++) {
		size_t cb = u / g->parts, rp = u % g->parts;
		size_t c0 = t->cw ? cb * t->cw : col_at(cb, t->blocks, g->n);
		size_t c1 = cb + 1 == t->blocks ? g->n : t->cw ? c0 + t->cw : col_at(cb + 1, t->blocks, g->n);
		size_t r0 = rows_at(g, rp), r1 = rows_at(g, rp + 1);
		k_sgemm1(g->ta, g->tb, r1 - r0, c1 - c0, g->k, g->alpha, g->a + (g->ta ? r0 : r0 * g->lda), g->lda,
		         g->b + (g->tb ? c0 * g->ldb : c0), g->ldb, g->beta, g->c + r0 * g->ldc + c0, g->ldc);
	}
}

// gemm_one is k_sgemm's product in one call, a pass of t_gemm_rows of one
// unit in the pass profile.
static void gemm_one(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
                     const float *b, size_t ldb, float beta, float *c, size_t ldc) {
	if (!prof_on) {
		k_sgemm1(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
		return;
	}
	double t0 = prof_now();
	k_sgemm1(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
	double t1 = prof_now();
	pthread_mutex_lock(&busy);
	prof_add(t_gemm_rows, 1, t0, t1, t1, t1 - t0, 0, t1 - t0, 0);
	prof_gap(t_gemm_rows, 1, t0, t1);
	pthread_mutex_unlock(&busy);
}


// cols_plan cuts a product whose rows are too few to share (under
// PART_ROWS a part, and too little work for PART_WORK's exception: the
// MLP's first layer, 64 x 784 by 784 x 256) into one column block a
// thread, cut evenly on multiples of COL_ALIGN (col_at): each call
// packs its slice of B, where a cut by rows packed all of it again. No
// block narrower than the small-matrix line (BLAS_SMALL) allows, which
// the whole product is over. Only under kernels that give each element
// one call's bits so cut (cols_ok: OpenBLAS's SkylakeX and Cooperlake;
// not Haswell's, which AVX2 CPUs and the Zens before 5 load). It returns
// the blocks, 1 where the product stays one call. The MLP at one rank of 2 threads: its step was 1.0 to
// 1.09 times one thread's on the Zen 4 VM (49th session), this product
// half the step's products and a thread's alone.
// cols_ok: the loaded OpenBLAS keeps the bits when cut into columns
// (model.colsKeepBits); the plain loop and our own kernels are not cut so.
static int cols_ok;
void k_set_gemm_cols(int on) { cols_ok = on; }

static size_t cols_plan(size_t m, size_t n, size_t k) {
	if (!cols_ok || !blas || k_avx512_on()) return 1;
	size_t least = (size_t)(BLAS_SMALL / ((double)m * k)) + 1;
	least = (least + COL_ALIGN - 1) / COL_ALIGN * COL_ALIGN;
	// least + COL_ALIGN: a block cut on the alignment may lose up to
	// COL_ALIGN - 1 columns to its neighbour.
	size_t most = n / (least + COL_ALIGN), T = (size_t)nthreads;
	return most < T ? most : T;
}

// A product's plan across the threads (plan): one call, the tiles of a
// large B (above) or the column blocks of a short product (cols_plan),
// units of ROWCHUNK rows (a small B), or one part a thread.
enum plan { ONE_CALL, TILES, ROW_UNITS, ROW_PARTS };

// plan sets g (and *blocks and *cw for TILES) to the way k_sgemm cuts a
// product.
static enum plan plan(struct gemm *g, size_t *blocks, size_t *cw) {
	size_t m = g->m, n = g->n, k = g->k;
	double mnk = (double)m * n * k;
	g->units = m / GEMM_BLOCK, g->cut = NULL;
	if ((double)k * n >= BIG_B && n >= 2 * COLBLOCK && (double)m * k * 4 <= (double)k * n) {
		*blocks = (n + COLBLOCK - 1) / COLBLOCK, *cw = COLBLOCK;
		size_t fewest = (size_t)(BLAS_SMALL / ((double)GEMM_BLOCK * COLBLOCK * k)) + 1;
		g->parts = tile_parts(*blocks, (size_t)nthreads, g->units / fewest);
		return TILES;
	}
	if (nthreads <= 1 || mnk < (1 << 21)) return ONE_CALL;
	if (m >= 4 * ROWCHUNK && (double)k * n <= SMALL_B) {
		g->parts = g->units / (ROWCHUNK / GEMM_BLOCK);
		return ROW_UNITS;
	}
	// One part a thread, not one block: each call packs all of B again;
	// and no part under fewest blocks, which keeps it off the small-matrix
	// kernel, as the whole product (over 2^21) is. Two parts a thread, as
	// before, let a thread that finished take the other's second part,
	// but packed B twice as often: cut into 4 parts on one thread, the
	// GPT's 13 product shapes took 1.01 to 1.30 times one call (median
	// 1.15), into 2 parts 0.86 to 1.11 (median 1.04; a throwaway harness
	// over OpenBLAS, medians of 7 interleaved). The GPT's step at 2
	// threads, one part a thread against two: 10 of 12 rounds faster,
	// median 1.06 (two sittings of 6 rounds).
	size_t fewest = (size_t)(BLAS_SMALL / ((double)GEMM_BLOCK * n * k)) + 1;
	size_t T = (size_t)nthreads, parts = g->units / fewest;
	if (parts > T) parts = T;
	// And no part under PART_ROWS rows (each part packs all of B again),
	// unless the product is large enough to give each thread PART_WORK.
	size_t most = m / PART_ROWS, spread = mnk / PART_WORK;
	if (most < T) {
		size_t even = m / (2 * GEMM_BLOCK);
		if (even > T) even = T;
		if (even > spread) even = spread;
		if (even > most) most = even;
	}
	if (parts > most) parts = most;
	if (parts < 2) {
		if ((*blocks = cols_plan(m, n, k)) < 2) return ONE_CALL;
		g->parts = 1, *cw = 0;
		return TILES;
	}
	g->parts = parts;
	return ROW_PARTS;
}

// speed_cut cuts g's parts by the threads' learned speeds into c: only
// where each thread has a part of its own, and not in a simulation, whose
// threads are one.
static void speed_cut(struct gemm *g, struct cut *c) {
	if (g->parts != (size_t)nthreads || sim_T) return;
	cut_rows(c, g->units, g->parts, (size_t)(BLAS_SMALL / ((double)GEMM_BLOCK * g->n * g->k)) + 1);
	for (size_t i = 0; i < g->parts; i++) c->who[i] = -1;
	c->t0 = prof_now();
	g->cut = c;
}

// k_sgemm is k_sgemm1 cut across the threads when big enough (2 MFLOP),
// or into column blocks (above): each element of C stays one call's dot
// product over all of k, with the same bits (above).
void k_sgemm(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda, const float *b,
             size_t ldb, float beta, float *c, size_t ldc) {
	if (k_amx_on() && k_sgemm_amx_par(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) == 0) return;
	struct gemm g = {ta, tb, m, n, k, lda, ldb, ldc, alpha, beta, a, b, c, 0, 0, NULL};
	size_t blocks = 0, cw = 0;
	struct cut cut;
	switch (plan(&g, &blocks, &cw)) {
	case TILES: {
		struct tiles t = {g, blocks, cw};
		run(blocks * g.parts, t_gemm_tiles, &t);
		return;
	}
	case ONE_CALL:
		gemm_one(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
		return;
	case ROW_UNITS:
		run(g.parts, t_gemm_rows, &g);
		return;
	case ROW_PARTS:
		speed_cut(&g, &cut);
		run(g.parts, t_gemm_rows, &g);
		if (g.cut) learn(&cut, &g);
		return;
	}
}

// ---- two products in one pass ----
//
// k_sgemm_pair computes two independent products (neither writes what
// the other reads) as one pass where the first is cut one part a thread
// and the second into units of ROWCHUNK rows: each thread runs its part
// of the first, then takes the second's units as it finishes, so the
// first's uneven end is filled with the second's work instead of waited
// out at a pass's end. The GPT's tied head: dX = dY W (B the 77 MB
// table: one part a thread) and dW += dY^T X (50,257 rows). Each element
// is computed as k_sgemm computes it, so the bits are k_sgemm's. Other
// plans run as two k_sgemm calls.
struct pair {
	struct gemm x, y;
	size_t units; // x.parts + y.parts; share s starts with x's part s
};

// pair_share is the share (run_chunks's) that unit u lies in: the largest
// s with s*units/T <= u.
static size_t pair_share(const struct pair *q, size_t u) {
	size_t T = q->x.parts, s = u * T / q->units;
	while (s + 1 < T && (s + 1) * q->units / T <= u) s++;
	while (s > 0 && s * q->units / T > u) s--;
	return s;
}

// pair_unit is the product unit u runs: the first's part *i (0) or the
// second's unit *i (1); each share's first unit is the first's part.
static int pair_unit(const struct pair *q, size_t u, size_t *i) {
	size_t s = pair_share(q, u);
	if (u == s * q->units / q->x.parts) return *i = s, 0;
	return *i = u - s - 1, 1;
}

static void t_gemm_pair(void *p, size_t lo, size_t hi, int w) {
	struct pair *q = p;
	for (size_t u = lo; u < hi; u++) {
		size_t i;
		if (pair_unit(q, u, &i) == 0)
			t_gemm_rows(&q->x, i, i + 1, w);
		else
			t_gemm_rows(&q->y, i, i + 1, w);
	}
}

// gemm_of is a product's arguments as a plan's.
static struct gemm gemm_of(struct k_gemm p) {
	return (struct gemm){p.ta, p.tb, p.m, p.n, p.k, p.lda, p.ldb, p.ldc, p.alpha, p.beta, p.a, p.b, p.c};
}

void k_sgemm_pair(struct k_gemm x, struct k_gemm y) {
	struct pair q = {gemm_of(x), gemm_of(y)};
	size_t blocks = 0, cw = 0;
	if (k_amx_on() || plan(&q.x, &blocks, &cw) != ROW_PARTS || q.x.parts != (size_t)nthreads ||
	    plan(&q.y, &blocks, &cw) != ROW_UNITS) {
		k_sgemm(x.ta, x.tb, x.m, x.n, x.k, x.alpha, x.a, x.lda, x.b, x.ldb, x.beta, x.c, x.ldc);
		k_sgemm(y.ta, y.tb, y.m, y.n, y.k, y.alpha, y.a, y.lda, y.b, y.ldb, y.beta, y.c, y.ldc);
		return;
	}
	struct cut cut;
	speed_cut(&q.x, &cut);
	q.units = q.x.parts + q.y.parts;
	run(q.units, t_gemm_pair, &q);
	if (q.x.cut) learn(&cut, &q.x);
}

// k_pair_unit is t_gemm_pair's map for a test: unit u of a pair of x
// parts and y units is x's part (*which 0) or y's unit (*which 1) *i.
void k_pair_unit(size_t xparts, size_t yunits, size_t u, int *which, size_t *i) {
	struct pair q = {.units = xparts + yunits};
	q.x.parts = xparts;
	*which = pair_unit(&q, u, i);
}

// ---- convolution: parts of the batch, each im2col + SGEMM in cache ----

// A part's im2col matrix is at most CHUNK bytes, so the SGEMM reads back
// what im2col just wrote from the core's L2 cache instead of a matrix of
// tens of MB streamed through DRAM twice (measured on ResNet-20: see
// docs/BENCHMARKS.md); and a batch is cut into at most MAXPARTS parts.
#define CHUNK (1 << 20)
// WINO_CHUNK: the most bytes of transformed values (V and M) a Winograd
// forward part holds, where its products are winograd.c's (wino_part).
#define WINO_CHUNK (CHUNK / 2)

size_t k_conv_part(size_t n, size_t per_image) {
	size_t u = CHUNK / (4 * per_image);
	size_t most = (n + MAXPARTS - 1) / MAXPARTS;
	if (u > most) u = most;
	return u ? u : 1;
}

struct conv {
	const struct k_conv_shape *s;
	const float *x, *w, *dy;
	float *y, *dx, *parts;
	float beta;
	size_t u;
	const struct k_wino_plan *plan; // Winograd's tiles
	// A small layer's transformed kernels, each thread's own (own_kernels):
	// from kw (the weight, PyTorch's layout) or, when flip, kwt (the
	// forward's copy (o, 3, 3, c)) into u_own + w * u_floats, on its first
	// part.
	const float *kw;
	float *kwt;
	float *u_own;
	size_t u_floats;
	int flip;
	char made[MAXT];
	// An own-kernels forward's copy of the weight into wt (o, 3, 3, c) for
	// the input gradient: blocks of PERM_ROWS outputs, each taken by the
	// first thread to ask (permute_share).
	float *perm_wt;
	_Atomic size_t perm_next;
	const struct k_pre *pre; // Winograd: the BatchNorm and ReLU its input transform applies to x
	double *stats;           // Winograd's forward: each part's BatchNorm sums of y (k_wino_forward)
};

#define IMAGES(cv, i, b0, b1)                     \
	size_t b0 = (i) * (cv)->u, b1 = b0 + (cv)->u; \
	if (b1 > (cv)->s->n) b1 = (cv)->s->n

static int direct(const struct k_conv_shape *s) { return s->k == 1 && s->stride == 1 && s->pad == 0; }

// cols is the im2col matrix of images [b0, b1) of x in worker w's scratch
// (x itself for a 1x1 stride-1 unpadded convolution).
static const float *cols(const struct k_conv_shape *s, const float *x, size_t b0, size_t b1, int w) {
	size_t in = s->h * s->w * s->c;
	if (direct(s)) return x + b0 * in;
	size_t K = s->k * s->k * s->c;
	float *m = scratch(w, (b1 - b0) * s->oh * s->ow * K);
	k_im2col(m, x + b0 * in, b1 - b0, s->c, s->h, s->w, s->k, s->stride, s->pad, s->oh, s->ow);
	return m;
}

static void t_conv_fwd(void *p, size_t lo, size_t hi, int w) {
	struct conv *cv = p;
	const struct k_conv_shape *s = cv->s;
	size_t P = s->oh * s->ow, K = s->k * s->k * s->c;
	for (size_t i = lo; i < hi; i++) {
		IMAGES(cv, i, b0, b1);
		const float *m = cols(s, cv->x, b0, b1, w);
		k_sgemm1(0, 1, (b1 - b0) * P, s->o, K, 1, m, K, cv->w, K, cv->beta, cv->y + b0 * P * s->o, s->o);
	}
}

// k_conv_forward: y (n, oh, ow, o) = x (n, h, w, c) convolved with wt
// (o, k, k, c), added to y when beta is 1.
void k_conv_forward(const struct k_conv_shape *s, float *y, const float *x, const float *wt, float beta) {
	size_t P = s->oh * s->ow, K = s->k * s->k * s->c;
	struct conv cv = {.s = s, .x = x, .w = wt, .y = y, .beta = beta};
	if (direct(s)) {
		k_sgemm(0, 1, s->n * P, s->o, K, 1, x, K, wt, K, beta, y, s->o);
		return;
	}
	cv.u = k_conv_part(s->n, P * K);
	run((s->n + cv.u - 1) / cv.u, t_conv_fwd, &cv);
}

// PERM_ROWS: the outputs of a block of permute_share.
#define PERM_ROWS 8

// permute_share copies blocks of the weight into perm_wt until none is
// left, each block taken by one thread: every thread of an own-kernels
// pass calls it on its first part, so the copy is done by the pass's
// end, by whichever threads came, with no pass of its own. Made by the
// caller before the pass, it was serial: ResNet-20 at 2 threads, once
// the 32- and 64-channel layers' kernels were own (OWN_COPIES), `train
// bench step --passes` put 1.25 to 1.29 ms a step between passes, the
// gaps before those forwards 0.17; shared out, 0.87 to 0.99 and 0.04-0.05
// (2 runs each, turned order). The forward does not read the copy (its
// kernels come from kw), only the input gradient's later pass.
static void permute_share(struct conv *cv) {
	if (!cv->perm_wt) return;
	size_t o = cv->s->o, c = cv->s->c, j;
	while ((j = atomic_fetch_add_explicit(&cv->perm_next, 1, memory_order_relaxed)) * PERM_ROWS < o) {
		size_t o0 = j * PERM_ROWS, o1 = o0 + PERM_ROWS < o ? o0 + PERM_ROWS : o;
		k_permute_weights(cv->perm_wt, cv->kw, o0, o1, c, 9);
	}
}

// kernels is worker w's transformed kernels for a Winograd pass: the
// shared ones, or its own, made on its first part.
static const float *kernels(struct conv *cv, int w) {
	if (!cv->u_own) return cv->w;
	float *u = cv->u_own + (size_t)w * cv->u_floats;
	if (!cv->made[w]) {
		permute_share(cv);
		size_t o = cv->flip ? cv->s->c : cv->s->o, c = cv->flip ? cv->s->o : cv->s->c;
		k_wino_weights(u, cv->kw, cv->flip ? cv->kwt : NULL, o, c, cv->flip, cv->plan, 0, o, 0, c, 0);
		cv->made[w] = 1;
	}
	return u;
}

static void t_wino(void *p, size_t lo, size_t hi, int w) {
	struct conv *cv = p;
	const struct k_conv_shape *s = cv->s;
	size_t in = s->h * s->w * s->c, out = s->h * s->w * s->o;
	const float *U = kernels(cv, w);
	for (size_t i = lo; i < hi; i++) {
		IMAGES(cv, i, b0, b1);
		float *work = scratch(w, k_wino_work_floats(b1 - b0, s->w, s->c, s->o, cv->plan));
		k_wino_conv(cv->y + b0 * out, cv->x + b0 * in, U, b1 - b0, s->h, s->w, s->c, s->o, cv->beta != 0, work,
		            cv->plan, cv->pre);
		if (cv->stats) k_bn_stats(cv->y + b0 * out, (b1 - b0) * s->h * s->w, s->o, cv->stats + i * 2 * s->o);
	}
}

// wino_part is the images per part of a Winograd pass: in cache where
// that leaves the part's products at least 128 tiles as rows, else
// enough images for 128 (or the batch), for OpenBLAS's efficiency where
// an image has few tiles.
//
// A forward (or input gradient) whose products take winograd.c's own
// kernels (k_wino_own_mul), which go 12 tiles at a time whatever the
// count, has no use for 128 rows: its parts hold at most WINO_CHUNK of
// transformed values, so that V and M stay in the core's L2 beside the
// part's x, y and kernels. At CHUNK, a part of ResNet-20's 28x28x16
// layers was 4 images, 900 KB of V and M in a 1 MiB L2, and the input
// transform (in_rows44) was 13% of a one-thread step in `perf record`,
// against 17% for all the products; at 512 KiB the Winograd forward
// passes took a tenth less (docs/cpu-speed.md, "Winograd's parts sized for L2").
// The weight gradient's parts stay as they were: each part adds a
// partial sum of the kernels' gradient, and cut as finely, their sum
// cost what the cache saved; it transforms its part in pieces instead
// (wino_dw_sub).
static size_t wino_part(const struct k_conv_shape *s, const struct k_wino_plan *p, int fwd) {
	size_t per = k_wino_work_floats(1, s->w, s->c, s->o, p);
	if (fwd && k_wino_own_mul(s->c, s->o)) {
		size_t u = WINO_CHUNK / (4 * per), most = (s->n + MAXPARTS - 1) / MAXPARTS;
		if (u > most) u = most;
		return u ? u : 1;
	}
	size_t tiles = 0;
	for (int i = 0; i < p->n; i++) tiles += p->c[i].ny * p->c[i].nx;
	size_t u = k_conv_part(s->n, per);
	if (u * tiles < 128) u = (128 + tiles - 1) / tiles;
	return u < s->n ? u : s->n;
}

static struct kept ukern; // the transformed kernels

// OWN_KERNELS: the most floats of a layer's transformed kernels that
// every thread makes for itself, on its first part of the pass, instead
// of one pass of WINO_BLOCK outputs a unit before the products, at any
// thread count. A 16-channel layer's (36 x 16 x 16) were one unit: one
// thread transformed while the others waited, then every thread's
// products read them from its cache (ResNet-20, 2 threads, `perf
// record`: that pass took 2.2 times its one-thread time). Made by each
// thread, they are the same values, and stay in its own cache; 16 Ki
// floats, the 16-channel layers' 9,792.
#define OWN_KERNELS (16 * 1024)

// OWN_COPIES: larger kernels are each thread's own too where all the
// threads' copies together are at most this many floats (1.25 MiB). The
// shared pass writes them with non-temporal stores (k_wino_weights), so
// every thread's products then read them from memory, which its own copy
// spares; the copies cost nthreads - 1 more transforms. At 2 threads
// that takes ResNet-20's 32- and 64-channel layers (104,000 and 148,032
// floats): `train bench step --passes`, 2 threads, 6 rounds, their
// t_wino_weights passes (0.68 ms a step) gone and t_wino's 11.42 ms a
// step 11.46; scripts/bench/ab-step.sh 1.009 (12 of 16 rounds faster,
// medians 27.26 -> 26.87 ms), 1.015 (8 of 12) in another run. At
// 16 threads only the 16-channel layers stay (their copies 157 K), on
// the reasoning that 16 transforms of a layer would cost more than the
// shared pass's reads: not measured (no 16-core machine since).
#define OWN_COPIES (320 * 1024)

static int own_kernels(size_t nu) { return nu <= OWN_KERNELS || (size_t)nthreads * nu <= OWN_COPIES; }

// k_wino_own_runs counts the passes whose threads made their own kernels
// (a test's check that its shapes take the path).
static long own_runs;
long k_wino_own_runs(void) { return own_runs; }

// ---- Winograd passes wider than their parts ----
//
// A pass with fewer parts than threads leaves the rest idle: at batch 64,
// ResNet-20's 7x7 layers are 2 parts of 32 images (128 tiles as the
// products' rows, for their efficiency: wino_part) and its 14x14 layers
// 8. Timed pass by pass at one thread (a throwaway counter in run_chunks,
// on aa50dd5), those passes were 30% of the step, and at 16 threads they
// alone bound a rank to 5.5 times one thread's speed; on the GPU
// machine's 16 cores a rank reached 3.66 (docs/cores/2026-11-28-aa50dd5.md).
// So such a pass runs as three, each cut finer than the parts: every
// image's input transforms (and, for the weight gradient, its output
// gradient's), then each part's products point by point ((m+2)^2 a class
// and a part), then every image's output transform. Each product is the
// fused path's own call on the same rows, and each transform an image's
// own, so the bits are the fused path's whatever the thread count
// (TestWinogradWide). The cost: every part's transformed values at once
// (wide_buf, most(p) * n * (C + O) floats, kept), and two more hand-offs
// a class.

static struct kept wbuf; // every part's transformed values

// wide reports whether a pass of parts parts runs wide.
static int wide(size_t parts) { return nthreads > 1 && parts < (size_t)nthreads; }

// k_wino_wide_runs counts the passes that ran wide (a test's check that
// its shapes take the path).
static long wide_runs;
long k_wino_wide_runs(void) { return wide_runs; }

struct wd {
	const struct k_conv_shape *s;
	const struct k_wino_plan *plan;
	int cls, add;
	size_t C, O, u, parts, tiles, a2;
	const float *x, *dy, *U, *zero; // U: the class's transformed kernels
	float *y, *V, *M, *dU;          // dU: the class's rows in part 0's weight gradient
	size_t K;                       // floats of one part's weight gradient
	const struct k_pre *pre;        // the BatchNorm and ReLU x's transform applies
};

// t_wide_in transforms images [lo, hi): x into V, and, for the weight
// gradient (dy set), dy into M.
static void t_wide_in(void *p, size_t lo, size_t hi, int w) {
	struct wd *d = p;
	const struct k_conv_shape *s = d->s;
	size_t rows = d->tiles * d->a2;
	(void)w;
	k_wino_spread(0, d->V + lo * rows * d->C, d->x + lo * s->h * s->w * d->C, hi - lo, s->h, s->w, d->C, d->zero,
	              d->plan, d->cls, d->pre);
	if (d->dy)
		k_wino_spread(1, d->M + lo * rows * d->O, d->dy + lo * s->h * s->w * d->O, hi - lo, s->h, s->w, d->O,
		              d->zero, d->plan, d->cls, NULL);
}

// t_wide_mul runs products [lo, hi), product q being point q % a2 of part
// q / a2: the forward's M = V U, or the weight gradient's dU = M^T V.
static void t_wide_mul(void *p, size_t lo, size_t hi, int w) {
	struct wd *d = p;
	size_t C = d->C, O = d->O, a2 = d->a2;
	(void)w;
	for (size_t q = lo; q < hi; q++) {
		size_t part = q / a2, j = q % a2, b0 = part * d->u, b1 = b0 + d->u < d->s->n ? b0 + d->u : d->s->n;
		size_t T = (b1 - b0) * d->tiles, r0 = b0 * d->tiles;
		const float *V = d->V + r0 * a2 * C + j * C;
		float *M = d->M + r0 * a2 * O + j * O;
		if (d->dy)
			k_wino_dw_mul(d->dU + part * d->K + j * k_wino_ld(C, O), M, a2 * O, V, a2 * C, T, C, O, 1, 0);
		else
			k_wino_mul(M, a2 * O, V, a2 * C, d->U + j * k_wino_ld(C, O), T, C, O, 1);
	}
}

// t_wide_out brings images [lo, hi) of M back to y.
static void t_wide_out(void *p, size_t lo, size_t hi, int w) {
	struct wd *d = p;
	const struct k_conv_shape *s = d->s;
	size_t O = d->O;
	k_wino_gather(d->y + lo * s->h * s->w * O, d->M + lo * d->tiles * d->a2 * O, hi - lo, s->h, s->w, O, d->add,
	              scratch(w, s->w * (d->C > O ? d->C : O)), d->plan, d->cls);
}

// wide_passes runs a forward (dy NULL: y from x and U) or a weight
// gradient (parts' dU from x and dy), class by class.
static void wide_passes(struct wd *d) {
	const struct k_conv_shape *s = d->s;
	size_t C = d->C, O = d->O, big = C > O ? C : O, need = k_wino_work_floats(s->n, s->w, C, O, d->plan);
	size_t rows = (need - 2 * s->w * big) / (C + O); // V's and M's, the rest two rows of zeros
	float *buf = keep(&wbuf, need * sizeof(float));
	wide_runs++;
	d->V = buf, d->M = buf + rows * C;
	float *zero = d->M + rows * O;
	memset(zero, 0, s->w * big * sizeof(float));
	d->zero = zero;
	for (int i = 0; i < d->plan->n; i++) {
		d->cls = i;
		d->tiles = k_wino_class_tiles(d->plan, i);
		d->a2 = k_wino_class_points(d->plan, i);
		run(s->n, t_wide_in, d);
		run(d->parts * d->a2, t_wide_mul, d);
		if (d->dy)
			d->dU += d->a2 * k_wino_ld(C, O);
		else {
			run(s->n, t_wide_out, d);
			d->U += d->a2 * k_wino_ld(C, O);
		}
	}
}

// k_buffers_misaligned counts the passes' buffers (scratch, partials,
// the transformed kernels) that do not start on a cache line (a test's
// check of lines()).
int k_buffers_misaligned(void) {
	int bad = ((uintptr_t)parts.p % 64 != 0) + ((uintptr_t)ukern.p % 64 != 0);
	for (int w = 0; w < MAXT; w++) bad += (uintptr_t)scr[w].p % 64 != 0;
	return bad;
}

// k_pool_check runs passes passes of units units each (a test's check of
// run_chunks' hand-offs), pausing between them for 0 to 300 us, so that
// the workers find the next pass while spinning, while falling asleep
// and asleep. Each unit counts its runs; it returns how many units of all
// the passes did not run exactly once. A lost wake-up hangs it.
struct pc {
	_Atomic unsigned *runs;
};
static void t_pool_check(void *p, size_t lo, size_t hi, int w) {
	struct pc *c = p;
	(void)w;
	for (size_t i = lo; i < hi; i++) atomic_fetch_add(&c->runs[i], 1);
}
int k_pool_check(int passes, int units, unsigned seed) {
	_Atomic unsigned *runs = calloc((size_t)units, sizeof *runs);
	if (!runs) abort();
	int bad = 0;
	for (int i = 0; i < passes; i++) {
		struct pc c = {runs};
		for (int u = 0; u < units; u++) atomic_store(&runs[u], 0);
		run((size_t)(1 + i % units), t_pool_check, &c);
		for (int u = 0; u < units; u++) bad += atomic_load(&runs[u]) != (u < 1 + i % units);
		seed = seed * 1103515245u + 12345u;
		struct timespec ts = {0, (long)((seed >> 8) % 300) * 1000};
		nanosleep(&ts, NULL);
	}
	free(runs);
	return bad;
}

// k_sim_check runs one pass of units units on T simulated threads, unit
// u spinning (1 + u % 3) * us microseconds, for a test: how many times
// each unit ran, which simulated thread ran it, the longest unit, and
// the pass's time on the caller and at T threads.
struct simck {
	int *runs, *who;
	double us, longest;
};
// spin_unit spins unit u's (1 + u % 3) * us microseconds and returns
// the seconds it took (the tests' passes of known work).
static double spin_unit(size_t u, double us) {
	double t0 = prof_now(), t;
	while ((t = prof_now() - t0) < us * 1e-6 * (double)(1 + u % 3)) PAUSE();
	return t;
}

static void t_sim_check(void *p, size_t lo, size_t hi, int w) {
	struct simck *k = p;
	for (size_t u = lo; u < hi; u++) {
		k->runs[u]++, k->who[u] = w;
		double t = spin_unit(u, k->us);
		if (t > k->longest) k->longest = t;
	}
}
void k_sim_check(int units, int T, double us, int *runs, int *who, double *longest, double *serial, double *span) {
	struct simck k = {runs, who, us, 0};
	int was = sim_T;
	k_simulate_threads(T);
	k_pass_profile(1);
	run((size_t)units, t_sim_check, &k);
	*serial = nprof ? prof[0].work : 0, *span = nprof ? prof[0].total : 0;
	k_pass_profile(0);
	k_simulate_threads(was);
	*longest = k.longest;
}

// k_spin_pass runs one real pass of units units on the pool, unit u
// spinning (1 + u % 3) * us microseconds: a test's check of the pass
// profile's per-thread times, whose units' summed time it knows.
struct spin {
	double us;
};
static void t_spin(void *p, size_t lo, size_t hi, int w) {
	struct spin *s = p;
	(void)w;
	for (size_t u = lo; u < hi; u++) spin_unit(u, s->us);
}
void k_spin_pass(int units, double us) {
	struct spin s = {us};
	run((size_t)units, t_spin, &s);
}

// A layer's kernels to and from Winograd's space, a block of outputs by
// inputs a unit across the threads (serial, they were 3% of a 2-thread
// ResNet-20 step, with the pool's other thread waiting; by blocks of
// outputs alone, a 64-channel layer's were 4 units, which 16 threads ran
// 3.4 times faster than one, `--simulate-threads 16`). Blocks are
// WINO_BLOCK by WINO_BLOCK, halved (down to WK_LEAST) while there are
// fewer than the threads: in blocks of 16 by 16, a 32-channel layer's 4
// units ran 2.7 to 3.0 times faster at 16 threads than on one, and a
// 16-channel layer's gradient was 1 unit. Each kernel's transform is its
// own: the cut changes no bits.
// A block is halved across the dimension its writes run along first, so
// that it keeps WINO_BLOCK floats, a cache line, along it: the forward's
// U (points, c, o) runs along the outputs, the input gradient's U
// (points, o, c in its own terms) and the weight gradient's dwt (o, 3, 3,
// c) along the inputs. Halved in turn, a 32-channel layer's blocks at 16
// threads were 8 by 8, two threads writing every line of U; on the
// 16-core machine (2026-11-30) the kernels' transforms did 12 times one
// thread's work at 16 threads (`--passes`), 7 times for the gradient's.
#define WK_LEAST 4
struct wk {
	float *u, *dwt, *parts, *dw;
	const float *w; // the forward's weight (o, c, 3, 3)
	float *wt;      // its copy (o, 3, 3, c): set by the forward, read when flip
	size_t o, c;
	int flip;
	const struct k_wino_plan *plan;
	size_t bo, bc; // a unit's outputs and inputs (wk_cut)
};

// wk_blocks is the unit count of a layer's kernels: blocks of outputs by
// blocks of inputs.
static size_t wk_blocks(const struct wk *k) { return (k->o + k->bo - 1) / k->bo * ((k->c + k->bc - 1) / k->bc); }

// wk_cut sets the blocks' sizes for T threads (the pool's; above): a
// block's writes run along its outputs (the forward's U) or, when
// along_inputs, its inputs (the input gradient's U, the weight
// gradient's dwt), and the other side is halved first.
static void wk_cut(struct wk *k, int along_inputs, int T) {
	k->bo = k->bc = WINO_BLOCK;
	size_t *first = along_inputs ? &k->bo : &k->bc, *then = along_inputs ? &k->bc : &k->bo;
	while (wk_blocks(k) < (size_t)T && (k->bo > WK_LEAST || k->bc > WK_LEAST)) {
		if (*first > WK_LEAST)
			*first /= 2;
		else
			*then /= 2;
	}
}

// k_wk_cut is wk_cut's blocks for o outputs and c inputs at T threads (a
// test's check of the cut).
void k_wk_cut(size_t o, size_t c, int along_inputs, int T, size_t *bo, size_t *bc) {
	struct wk k = {.o = o, .c = c};
	wk_cut(&k, along_inputs, T);
	*bo = k.bo, *bc = k.bc;
}

// wk_unit is unit u's outputs [*p0, *p1) and inputs [*c0, *c1).
static void wk_unit(const struct wk *k, size_t u, size_t *p0, size_t *p1, size_t *c0, size_t *c1) {
	size_t cb = (k->c + k->bc - 1) / k->bc;
	*p0 = u / cb * k->bo, *c0 = u % cb * k->bc;
	*p1 = *p0 + k->bo < k->o ? *p0 + k->bo : k->o;
	*c1 = *c0 + k->bc < k->c ? *c0 + k->bc : k->c;
}

// t_wino_weights streams U out when other threads' products will read
// it (k_wino_weights' stream).
static void t_wino_weights(void *p, size_t lo, size_t hi, int w) {
	struct wk *k = p;
	(void)w;
	for (size_t u = lo; u < hi; u++) {
		size_t p0, p1, c0, c1;
		wk_unit(k, u, &p0, &p1, &c0, &c1);
		k_wino_weights(k->u, k->w, k->wt, k->o, k->c, k->flip, k->plan, p0, p1, c0, c1, nthreads > 1);
	}
}

// SUM_SLICE: the values of a slice of sum_first's sums, a unit: 8 KB of
// each group's first part, which stays in L1 while the group's other
// parts' slices are added to it.
#define SUM_SLICE 2048

// SUM_GROUPS: the groups sum_first sums its parts in, whatever the
// thread count (the bits depend on it).
#define SUM_GROUPS 4

struct sf {
	float *p;
	size_t n, K, S, G; // parts, floats each, slices, groups
	int grouped;       // the groups summed already (t_sum_groups)
};

// sum_group adds parts [g n/G + 1, (g+1) n/G) into part g n/G, in order,
// floats [i0, i1); with all, then the groups' sums 1 to G-1 into part 0.
VEC static void sum_group(const struct sf *f, size_t g, size_t i0, size_t i1) {
	size_t a = g * f->n / f->G, b = (g + 1) * f->n / f->G;
	float *d = f->p + a * f->K + i0;
	for (size_t u = a + 1; u < b; u++) {
		const float *s = f->p + u * f->K + i0;
		for (size_t i = 0; i < i1 - i0; i++) d[i] += s[i];
	}
}

VEC static void sum_roots(const struct sf *f, size_t i0, size_t i1) {
	float *d = f->p + i0;
	for (size_t g = 1; g < f->G; g++) {
		const float *s = f->p + g * f->n / f->G * f->K + i0;
		for (size_t i = 0; i < i1 - i0; i++) d[i] += s[i];
	}
}

static void slice(const struct sf *f, size_t s, size_t *i0, size_t *i1) {
	*i0 = s * SUM_SLICE, *i1 = *i0 + SUM_SLICE < f->K ? *i0 + SUM_SLICE : f->K;
}

// t_sum_groups: a unit is one slice of one group, group-major, so that
// the pool's static shares give thread w the groups of the parts its
// share of the pass before made (w n/T on).
static void t_sum_groups(void *q, size_t lo, size_t hi, int w) {
	const struct sf *f = q;
	(void)w;
	for (size_t u = lo; u < hi; u++) {
		size_t i0, i1;
		slice(f, u % f->S, &i0, &i1);
		sum_group(f, u / f->S, i0, i1);
	}
}

// t_sum: a unit is a slice of the groups' sums into part 0, or, on one
// thread, of the whole sum.
static void t_sum(void *q, size_t lo, size_t hi, int w) {
	const struct sf *f = q;
	(void)w;
	for (size_t s = lo; s < hi; s++) {
		size_t i0, i1;
		slice(f, s, &i0, &i1);
		if (!f->grouped)
			for (size_t g = 0; g < f->G; g++) sum_group(f, g, i0, i1);
		sum_roots(f, i0, i1);
	}
}

// sum_first sums parts 0 to n-1 of K floats each (p, one after another)
// into part 0: SUM_GROUPS groups of consecutive parts each in part
// order, then the groups' sums in order, the same sums at any thread
// count. Every convolution's weight gradient (Winograd's, im2col's, the
// few-channel stem's) sums its parts through it. At 2 threads or more the
// groups go first, by slices, each group's mostly on the thread whose
// share of the pass before made its parts, then their sums by slices.
// Summed in part order by slices alone (until the 46th session), every
// thread read every other's parts: ResNet-20 at 2 threads, the sum did
// 2.1 times one thread's work, and the weight gradient's next pass,
// writing parts the other core had read, 1.04 (docs/cpu-speed.md, "The
// 46th session"). Cut by output channels with the transform after it,
// as before that, a 16-channel layer's reduction was one unit: one
// thread summed while the other waited (4.7 times its one-thread time).
static void sum_first(float *p, size_t n, size_t K) {
	struct sf f = {.p = p, .n = n, .K = K, .S = (K + SUM_SLICE - 1) / SUM_SLICE, .G = n < SUM_GROUPS ? n : SUM_GROUPS};
	if (n < 2) return;
	if (nthreads > 1 && n > f.G) run(f.G * f.S, t_sum_groups, &f), f.grouped = 1;
	run(f.S, t_sum, &f);
}

// add_weights adds outputs [o0, o1) and inputs [c0, c1) of a weight
// gradient g (o, k*k, c), the passes' layout, into dw (o, c, k*k),
// PyTorch's: every convolution's last step of its weight gradient.
static void add_weights(float *dw, const float *g, size_t o0, size_t o1, size_t c0, size_t c1, size_t c, size_t kk) {
	for (size_t o = o0; o < o1; o++) {
		const float *src = g + o * kk * c;
		float *dst = dw + o * kk * c;
		for (size_t ch = c0; ch < c1; ch++)
			for (size_t ij = 0; ij < kk; ij++) dst[ch * kk + ij] += src[ij * c + ch];
	}
}

// aw: add_weights of all of a gradient's inputs, outputs [lo, hi) a
// chunk.
struct aw {
	float *dw;
	const float *g;
	size_t c, kk;
};

static void t_add_weights(void *p, size_t lo, size_t hi, int w) {
	struct aw *a = p;
	(void)w;
	add_weights(a->dw, a->g, lo, hi, 0, a->c, a->c, a->kk);
}

// dw_by_parts runs fn over the batch's parts of cv->u images, each
// setting its o x (k, k, c) sums at cv->parts + part * o*k*k*c, and adds
// their sum (sum_first's order) to dw (o, c, k, k): a weight gradient's bits
// depend on the parts, which the batch and the shape fix, never on the
// threads (im2col's, the stem's and the direct path's).
static void dw_by_parts(struct conv *cv, float *dw, task_fn fn) {
	const struct k_conv_shape *s = cv->s;
	size_t kk = s->k * s->k, OK = s->o * kk * s->c, units = (s->n + cv->u - 1) / cv->u;
	cv->parts = partials(units * OK * sizeof(float));
	run(units, fn, cv);
	sum_first(cv->parts, units, OK);
	struct aw a = {dw, cv->parts, s->c, kk};
	run_chunks(s->o, spread(s->o), t_add_weights, &a);
}

// k_permute_weights copies outputs [o0, o1) of a weight w (o, c, k*k),
// PyTorch's layout, into wt (o, k*k, c), the passes' layout:
// add_weights' way back (Conv2D.permute's, and a small Winograd layer's
// copy for its input gradient).
void k_permute_weights(float *wt, const float *w, size_t o0, size_t o1, size_t c, size_t kk) {
	for (size_t o = o0; o < o1; o++) {
		const float *src = w + o * c * kk;
		float *dst = wt + o * kk * c;
		for (size_t ch = 0; ch < c; ch++)
			for (size_t ij = 0; ij < kk; ij++) dst[ij * c + ch] = src[ch * kk + ij];
	}
}

// t_wino_weights_grad takes the summed dU of its outputs back to dwt (o,
// 3, 3, c) and adds that to the layer's gradient dw (o, c, 3, 3,
// PyTorch's layout): the permuted add ran in Go on one thread (ResNet-20
// at 2 threads, `train bench step --passes`: the time outside the passes
// was the most any one kind of work lost to perfect scaling).
static void t_wino_weights_grad(void *p, size_t lo, size_t hi, int w) {
	struct wk *k = p;
	(void)w;
	for (size_t u = lo; u < hi; u++) {
		size_t p0, p1, c0, c1;
		wk_unit(k, u, &p0, &p1, &c0, &c1);
		k_wino_weights_grad(k->dwt, k->parts, k->o, k->c, k->plan, p0, p1, c0, c1);
		add_weights(k->dw, k->dwt, p0, p1, c0, c1, k->c, 9);
	}
}

static struct kept bnparts; // the parts' statistics

// add_stats adds the parts' statistics to stats as sum_parts does, and
// reports whether the pass made them.
static int add_stats(const struct conv *cv, size_t parts, double *stats) {
	if (!cv->stats) return 0;
	add_parts(stats, cv->stats, parts, 2 * cv->s->o);
	return 1;
}

// k_wino_forward: y (n, h, w, o) = x (n, h, w, c) convolved, 3x3 stride
// 1 padding 1, with the kernels of w, added to y when beta is 1; parts
// of the batch across the threads. w is the layer's weight in PyTorch's
// layout, (o, c, 3, 3), and the forward also copies it into wt (o, 3, 3,
// c), the layout the input gradient's transforms read: when flip, they
// take the forward layer's wt ((c, 3, 3, o) in this call's terms) for its
// input gradient (x is then dy; w is not read).
// The transformed kernels (k_wino_weights) live only through the call,
// in one buffer grown to the largest layer's, like partials: kept per
// layer, F(4x4)'s came to 150 MB in ResNet-50.
// pmean, pscale, pbeta, when pmean is not NULL: the input is x's
// BatchNorm and ReLU (struct k_pre; a forward where k_wino_fuses(c)).
// stats, when not NULL, is 2o sums that receive y's BatchNorm statistics,
// each part's made while its y is in the core's cache: the bits of
// k_bn_stats_par with parts of k_wino_fwd_part images, and one pass less
// over y. It returns whether it made them (not where the pass runs
// wide).
int k_wino_forward(const struct k_conv_shape *s, float *y, const float *x, const float *w, float *wt, int flip,
                   float beta, int m, const float *pmean, const float *pscale, const float *pbeta, double *stats) {
	struct k_wino_plan plan;
	k_wino_plan(&plan, s->h, s->w, s->c, s->o, m);
	size_t nu = k_wino_points(&plan) * k_wino_ld(s->c, s->o);
	struct k_pre pre = {pmean, pscale, pbeta};
	struct conv cv = {.s = s, .x = x, .y = y, .beta = beta, .plan = &plan, .pre = pmean ? &pre : NULL};
	cv.u = wino_part(s, &plan, 1);
	size_t parts = (s->n + cv.u - 1) / cv.u;
	if (stats && !wide(parts)) {
		cv.stats = keep(&bnparts, parts * 2 * s->o * sizeof(double));
		memset(cv.stats, 0, parts * 2 * s->o * sizeof(double));
	}
	if (nthreads > 1 && !wide(parts) && own_kernels(nu)) {
		cv.u_floats = (nu + 15) & ~(size_t)15; // each thread's on its own cache lines
		cv.u_own = keep(&ukern, (size_t)nthreads * cv.u_floats * sizeof(float));
		// Every thread transforms all of it, so the copy is shared out.
		if (!flip && wt) cv.perm_wt = wt;
		cv.kw = w, cv.kwt = wt, cv.flip = flip;
		own_runs++;
		run(parts, t_wino, &cv);
		return add_stats(&cv, parts, stats);
	}
	float *u = keep(&ukern, nu * sizeof(float));
	struct wk k = {
	    .u = u, .w = w, .wt = wt, .o = flip ? s->c : s->o, .c = flip ? s->o : s->c, .flip = flip, .plan = &plan};
	wk_cut(&k, flip, nthreads);
	run(wk_blocks(&k), t_wino_weights, &k);
	cv.w = u;
	if (wide(parts)) {
		struct wd d = {.s = s, .plan = &plan, .add = beta != 0, .C = s->c, .O = s->o, .u = cv.u, .parts = parts,
		               .x = x, .U = u, .y = y, .pre = cv.pre};
		wide_passes(&d);
		return 0;
	}
	run(parts, t_wino, &cv);
	return add_stats(&cv, parts, stats);
}

// k_wino_fwd_part is the images of a part of k_wino_forward's passes
// (BatchNorm's parts where the forward makes its statistics).
size_t k_wino_fwd_part(const struct k_conv_shape *s, int m) {
	struct k_wino_plan plan;
	k_wino_plan(&plan, s->h, s->w, s->c, s->o, m);
	return wino_part(s, &plan, 1);
}

// wino_dw_sub is the images a weight gradient's part transforms at a
// time: as many as a forward part holds where the sums are winograd.c's
// own (the same bits whatever the step: k_wino_dw_part), else all of
// them.
static size_t wino_dw_sub(const struct k_conv_shape *s, const struct k_wino_plan *p, size_t u) {
	if (!k_wino_own_dw(s->c, s->o)) return u;
	size_t sub = WINO_CHUNK / (4 * k_wino_work_floats(1, s->w, s->c, s->o, p));
	return sub < 1 ? 1 : sub < u ? sub : u;
}

static void t_wino_dw(void *p, size_t lo, size_t hi, int w) {
	struct conv *cv = p;
	const struct k_conv_shape *s = cv->s;
	size_t in = s->h * s->w * s->c, out = s->h * s->w * s->o, sub = wino_dw_sub(s, cv->plan, cv->u);
	float *work = scratch(w, k_wino_work_floats(sub, s->w, s->c, s->o, cv->plan));
	for (size_t i = lo; i < hi; i++) {
		IMAGES(cv, i, b0, b1);
		k_wino_dw_part(cv->parts + i * k_wino_points(cv->plan) * k_wino_ld(s->c, s->o), cv->x + b0 * in, cv->dy + b0 * out,
		               b1 - b0, s->h, s->w, s->c, s->o, work, cv->plan, sub, cv->pre);
	}
}

// k_wino_dw adds to dw (o, c, 3, 3) the weight gradient of a 3x3
// stride-1 padding-1 convolution through Winograd's transforms: each
// part's (m+2)^2 products, summed (sum_first), then brought back into
// dwt (o, 3, 3, c) by k_wino_weights_grad, and dwt added to dw, both in
// that pass. pmean, pscale, pbeta as in k_wino_forward: the forward's
// input was x's BatchNorm and ReLU, which the transforms apply again.
void k_wino_dw(const struct k_conv_shape *s, float *dw, float *dwt, const float *dy, const float *x, int m,
               const float *pmean, const float *pscale, const float *pbeta) {
	struct k_wino_plan plan;
	k_wino_plan(&plan, s->h, s->w, s->c, s->o, m);
	size_t K = k_wino_points(&plan) * k_wino_ld(s->c, s->o);
	struct k_pre pre = {pmean, pscale, pbeta};
	struct conv cv = {.s = s, .x = x, .dy = dy, .plan = &plan, .pre = pmean ? &pre : NULL};
	cv.u = wino_part(s, &plan, 0);
	size_t units = (s->n + cv.u - 1) / cv.u;
	cv.parts = partials(units * K * sizeof(float));
	if (wide(units)) {
		struct wd d = {.s = s, .plan = &plan, .C = s->c, .O = s->o, .u = cv.u, .parts = units, .x = x, .dy = dy,
		               .dU = cv.parts, .K = K, .pre = cv.pre};
		wide_passes(&d);
	} else
		run(units, t_wino_dw, &cv);
	sum_first(cv.parts, units, K);
	struct wk k = {.dwt = dwt, .dw = dw, .parts = cv.parts, .o = s->o, .c = s->c, .plan = &plan};
	wk_cut(&k, 1, nthreads);
	run(wk_blocks(&k), t_wino_weights_grad, &k);
}

// ---- 3x3 convolutions of 1 to 3 input channels, directly (conv_few.c) ----

static void t_few_fwd(void *p, size_t lo, size_t hi, int w) {
	struct conv *cv = p;
	const struct k_conv_shape *s = cv->s;
	size_t in = s->h * s->w * s->c, out = s->h * s->w * s->o;
	(void)w;
	for (size_t i = lo; i < hi; i++) {
		IMAGES(cv, i, b0, b1);
		k_few_forward_part(cv->y + b0 * out, cv->x + b0 * in, cv->w, b1 - b0, s->h, s->w, s->c, s->o, cv->beta != 0);
	}
}

// k_few_forward: y (n, h, w, o) = x (n, h, w, c) convolved with wt (o, 3,
// 3, c), stride 1 and padding 1, added to y when beta is 1; c is 1 to 3
// and o a multiple of 16.
void k_few_forward(const struct k_conv_shape *s, float *y, const float *x, const float *wt, float beta) {
	struct conv cv = {.s = s, .x = x, .w = wt, .y = y, .beta = beta};
	cv.u = k_conv_part(s->n, s->h * s->w * (s->c + s->o));
	run((s->n + cv.u - 1) / cv.u, t_few_fwd, &cv);
}

static void t_few_dw(void *p, size_t lo, size_t hi, int w) {
	struct conv *cv = p;
	const struct k_conv_shape *s = cv->s;
	size_t in = s->h * s->w * s->c, out = s->h * s->w * s->o;
	(void)w;
	for (size_t i = lo; i < hi; i++) {
		IMAGES(cv, i, b0, b1);
		k_few_dw_part(cv->parts + i * 9 * s->c * s->o, cv->x + b0 * in, cv->dy + b0 * out, b1 - b0, s->h, s->w, s->c,
		              s->o);
	}
}

// k_few_dw adds to dw (o, c, 3, 3) k_few_forward's weight gradient: each
// part's sums, then their sum (sum_first).
void k_few_dw(const struct k_conv_shape *s, float *dw, const float *dy, const float *x) {
	struct conv cv = {.s = s, .x = x, .dy = dy};
	cv.u = k_conv_part(s->n, s->h * s->w * (s->c + s->o));
	dw_by_parts(&cv, dw, t_few_dw);
}

static void t_conv_dw(void *p, size_t lo, size_t hi, int w) {
	struct conv *cv = p;
	const struct k_conv_shape *s = cv->s;
	size_t P = s->oh * s->ow, K = s->k * s->k * s->c;
	for (size_t i = lo; i < hi; i++) {
		IMAGES(cv, i, b0, b1);
		const float *m = cols(s, cv->x, b0, b1, w);
		k_sgemm1(1, 0, s->o, K, (b1 - b0) * P, 1, cv->dy + b0 * P * s->o, s->o, m, K, 0, cv->parts + i * s->o * K, K);
	}
}

// k_conv_dw adds to dw (o, c, k, k) dy^T im2col(x) over the batch: each
// part's product, then their sum in part order.
void k_conv_dw(const struct k_conv_shape *s, float *dw, const float *dy, const float *x) {
	size_t P = s->oh * s->ow, K = s->k * s->k * s->c;
	struct conv cv = {.s = s, .x = x, .dy = dy};
	cv.u = direct(s) ? (s->n + MAXPARTS - 1) / MAXPARTS : k_conv_part(s->n, P * K);
	dw_by_parts(&cv, dw, t_conv_dw);
}

// col2im adds dcols (n*oh*ow, k*k*c) into dx (n, h, w, c), the inverse
// of im2col, a kernel row at a time where it lies inside the image.
static void col2im(const struct k_conv_shape *s, float *dx, const float *dcols, size_t n) {
	size_t C = s->c, k = s->k, K = k * k * C, kc = k * C, in = s->h * s->w * C;
	const float *r = dcols;
	for (size_t b = 0; b < n; b++) {
		float *img = dx + b * in;
		for (size_t yo = 0; yo < s->oh; yo++)
			for (size_t xo = 0; xo < s->ow; xo++, r += K) {
				long iw0 = (long)(xo * s->stride) - (long)s->pad;
				int inside = iw0 >= 0 && iw0 + (long)k <= (long)s->w;
				for (size_t i = 0; i < k; i++) {
					long ih = (long)(yo * s->stride + i) - (long)s->pad;
					if (ih < 0 || ih >= (long)s->h) continue;
					const float *q = r + i * kc;
					if (inside) {
						float *d = img + ((size_t)ih * s->w + (size_t)iw0) * C;
						for (size_t j = 0; j < kc; j++) d[j] += q[j];
						continue;
					}
					for (size_t j = 0; j < k; j++) {
						long iw = iw0 + (long)j;
						if (iw < 0 || iw >= (long)s->w) continue;
						float *d = img + ((size_t)ih * s->w + (size_t)iw) * C;
						for (size_t ch = 0; ch < C; ch++) d[ch] += q[j * C + ch];
					}
				}
			}
	}
}

static void t_conv_dx(void *p, size_t lo, size_t hi, int w) {
	struct conv *cv = p;
	const struct k_conv_shape *s = cv->s;
	size_t P = s->oh * s->ow, K = s->k * s->k * s->c, in = s->h * s->w * s->c;
	for (size_t i = lo; i < hi; i++) {
		IMAGES(cv, i, b0, b1);
		float *dcols = scratch(w, (b1 - b0) * P * K);
		k_sgemm1(0, 0, (b1 - b0) * P, K, s->o, 1, cv->dy + b0 * P * s->o, s->o, cv->w, K, 0, dcols, K);
		memset(cv->dx + b0 * in, 0, (b1 - b0) * in * sizeof(float));
		col2im(s, cv->dx + b0 * in, dcols, b1 - b0);
	}
}

// dx of a stride-1 convolution is the forward convolution of dy with the
// flipped kernel wflip (k, k, o, c) and padding k-1-pad (a gather, no
// clearing of dx, and an inner dimension of k*k*o instead of o).
static void t_conv_dx1(void *p, size_t lo, size_t hi, int w) {
	struct conv *cv = p;
	const struct k_conv_shape *s = cv->s;
	size_t Pin = s->h * s->w, kd = s->k * s->k * s->o, out = s->oh * s->ow * s->o;
	for (size_t i = lo; i < hi; i++) {
		IMAGES(cv, i, b0, b1);
		float *m = scratch(w, (b1 - b0) * Pin * kd);
		k_im2col(m, cv->dy + b0 * out, b1 - b0, s->o, s->oh, s->ow, s->k, 1, s->k - 1 - s->pad, s->h, s->w);
		k_sgemm1(0, 0, (b1 - b0) * Pin, s->c, kd, 1, m, kd, cv->w, s->c, 0, cv->dx + b0 * Pin * s->c, s->c);
	}
}

// k_conv_dx sets dx (n, h, w, c) from dy: with wflip (stride 1) as a
// forward convolution, else as im2col's transpose of dy . wt; a 1x1
// stride-1 unpadded convolution is one product.
void k_conv_dx(const struct k_conv_shape *s, float *dx, const float *dy, const float *wt, const float *wflip) {
	size_t P = s->oh * s->ow, K = s->k * s->k * s->c;
	struct conv cv = {.s = s, .dy = dy, .dx = dx};
	if (direct(s)) {
		k_sgemm(0, 0, s->n * P, K, s->o, 1, dy, s->o, wt, K, 0, dx, K);
		return;
	}
	if (wflip) {
		cv.w = wflip;
		cv.u = k_conv_part(s->n, s->h * s->w * s->k * s->k * s->o);
		run((s->n + cv.u - 1) / cv.u, t_conv_dx1, &cv);
		return;
	}
	cv.w = wt;
	cv.u = k_conv_part(s->n, P * K);
	run((s->n + cv.u - 1) / cv.u, t_conv_dx, &cv);
}

// ---- strided convolutions of multiples of 16 channels, directly
// (conv_direct.c) ----

// dperm holds the weight permuted for the forward (k, k, c, o) or the
// input gradient (k, k, o, c), made on the caller's thread before the
// pass (at most a few hundred KB, against the pass's MFLOPs), in a pass
// of its own across the threads (spread), each row written in order and
// gathered from w: on the caller, scattering w's elements in w's order,
// ResNet-20's 32-to-64 forward permutation took 45 us from memory, rows
// in order 19.
static struct kept dperm;

struct dw_perm {
	const struct k_conv_shape *s;
	const float *w;
	float *d;
	int grad;
};

// t_direct_weights writes rows [lo, hi) of the permuted weight: row (t,
// r) of (k, k, c, o) or, for the gradient, of (k, k, o, c).
static void t_direct_weights(void *p, size_t lo, size_t hi, int w) {
	const struct dw_perm *q = p;
	size_t kk = q->s->k * q->s->k, C = q->s->c, O = q->s->o, R = q->grad ? O : C, L = q->grad ? C : O;
	// A row's step through w: along c (stride kk) or along o (C*kk).
	size_t step = q->grad ? kk : C * kk, rstep = q->grad ? C * kk : kk;
	(void)w;
	for (size_t u = lo; u < hi; u++) {
		size_t t = u / R, r = u % R;
		const float *src = q->w + r * rstep + t;
		float *row = q->d + u * L;
		for (size_t i = 0; i < L; i++) row[i] = src[i * step];
	}
}

static float *direct_weights(const struct k_conv_shape *s, const float *w, int grad) {
	size_t kk = s->k * s->k, rows = kk * (grad ? s->o : s->c);
	struct dw_perm q = {s, w, keep(&dperm, kk * s->c * s->o * sizeof(float)), grad};
	run_chunks(rows, spread(rows), t_direct_weights, &q);
	return q.d;
}

// direct_part is the images of a part: its x and dy (or y) within CHUNK.
static size_t direct_part(const struct k_conv_shape *s) {
	return k_conv_part(s->n, s->h * s->w * s->c + s->oh * s->ow * s->o);
}

static void t_direct_fwd(void *p, size_t lo, size_t hi, int w) {
	struct conv *cv = p;
	const struct k_conv_shape *s = cv->s;
	size_t in = s->h * s->w * s->c, out = s->oh * s->ow * s->o;
	(void)w;
	for (size_t i = lo; i < hi; i++) {
		IMAGES(cv, i, b0, b1);
		k_direct_forward_part(cv->y + b0 * out, cv->x + b0 * in, cv->w, s, b1 - b0, cv->beta != 0);
	}
}

// k_direct_forward: y (n, oh, ow, o) = x (n, h, w, c) convolved with w
// (o, c, k, k), PyTorch's layout, added to y when beta is 1.
void k_direct_forward(const struct k_conv_shape *s, float *y, const float *x, const float *w, float beta) {
	struct conv cv = {.s = s, .x = x, .w = direct_weights(s, w, 0), .y = y, .beta = beta};
	cv.u = direct_part(s);
	run((s->n + cv.u - 1) / cv.u, t_direct_fwd, &cv);
}

static void t_direct_dx(void *p, size_t lo, size_t hi, int w) {
	struct conv *cv = p;
	const struct k_conv_shape *s = cv->s;
	size_t in = s->h * s->w * s->c, out = s->oh * s->ow * s->o;
	(void)w;
	for (size_t i = lo; i < hi; i++) {
		IMAGES(cv, i, b0, b1);
		k_direct_dx_part(cv->dx + b0 * in, cv->dy + b0 * out, cv->w, s, b1 - b0);
	}
}

// k_direct_dx sets dx (n, h, w, c) to the input gradient from dy (n, oh,
// ow, o) and w (o, c, k, k).
void k_direct_dx(const struct k_conv_shape *s, float *dx, const float *dy, const float *w) {
	struct conv cv = {.s = s, .dy = dy, .dx = dx, .w = direct_weights(s, w, 1)};
	cv.u = direct_part(s);
	run((s->n + cv.u - 1) / cv.u, t_direct_dx, &cv);
}

static void t_direct_dw(void *p, size_t lo, size_t hi, int w) {
	struct conv *cv = p;
	const struct k_conv_shape *s = cv->s;
	size_t in = s->h * s->w * s->c, out = s->oh * s->ow * s->o, OK = s->o * s->k * s->k * s->c;
	(void)w;
	for (size_t i = lo; i < hi; i++) {
		IMAGES(cv, i, b0, b1);
		k_direct_dw_part(cv->parts + i * OK, cv->x + b0 * in, cv->dy + b0 * out, s, b1 - b0);
	}
}

// k_direct_dw adds to dw (o, c, k, k) the weight gradient over the
// batch: each part's sums, then their sum in part order.
void k_direct_dw(const struct k_conv_shape *s, float *dw, const float *dy, const float *x) {
	struct conv cv = {.s = s, .x = x, .dy = dy};
	cv.u = direct_part(s);
	dw_by_parts(&cv, dw, t_direct_dw);
}
