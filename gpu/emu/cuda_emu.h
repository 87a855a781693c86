// The CPU emulator's CUDA prelude: what NVRTC would provide, for compiling
// gpu/kernels/*.cu with g++ into a shared object that runs each launch on
// the CPU. The fake NVRTC (fake.inc) puts this file before the kernels and
// a trampoline per __global__ function after them.
//
// A block's threads are fibers (ucontext) on one OS thread, run in turn:
// a thread runs until it reaches __syncthreads, a warp operation (the
// shuffles, ballots, __syncwarp) or its end; a barrier opens when every
// thread of the block (or of the warp) still running has reached it. So
// the kernels run as CUDA defines them, barriers, __shared__ memory and
// warp shuffles included, with a deterministic schedule; what differs is
// speed, and that atomics are plain adds in a fixed order. Blocks run one
// after another, so `__shared__` (a static here) is each block's own.
// A barrier that some live thread can never reach (divergent
// __syncthreads) is reported as an error rather than a hang.
#pragma once

#include <math.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <type_traits>
#include <utility>

struct dim3 {
	unsigned x, y, z;
};

struct float2 {
	float x, y;
};
struct float4 {
	float x, y, z, w;
};
static inline float2 make_float2(float x, float y) { return {x, y}; }
static inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

namespace emu {

enum { READY, WAIT_BLOCK, WAIT_WARP, DONE };

struct fiber {
	ucontext_t ctx; // the first entry
	jmp_buf jb;     // where it waits
	bool started;
	int state;
	dim3 tid;
	int lin;
	unsigned long long slot; // a warp operation's value
	char *stack;
};

static const size_t stack_bytes = 256 << 10;
static fiber *fibers;
static int nfibers, cap;
static fiber *cur;
static ucontext_t sched;
static jmp_buf sched_jb;
static dim3 block_idx, block_dim, grid_dim;
static void (*tramp)(void **);
static void **args;
static char *dyn_smem;
static size_t dyn_cap;

// Switches: swapcontext enters a fiber the first time it ever runs;
// after that _setjmp/_longjmp, which do not save the signal mask
// (swapcontext's system call per switch was half the emulator's time).
// A fiber outlives its block: done, it waits, and the next block (of
// this kernel or the next) resumes it into another call of the kernel,
// so swapcontext runs once per fiber, not once per thread of every block
// (that was still 28% of a GPT step's time).
static void wait(int state) {
	cur->state = state;
	if (!_setjmp(cur->jb)) _longjmp(sched_jb, 1);
}

static void fiber_main() {
	for (;;) {
		tramp(args);
		wait(DONE);
	}
}

static void resume(fiber *f) {
	cur = f;
	if (_setjmp(sched_jb)) return;
	if (!f->started) {
		f->started = true;
		swapcontext(&sched, &f->ctx);
	} else
		_longjmp(f->jb, 1);
}

// run executes one block; 0, or -1 when a barrier can never open (its
// fibers are then abandoned mid-kernel, and made afresh next time).
static int run_block() {
	for (int i = 0; i < nfibers; i++) {
		fiber *f = &fibers[i];
		if (!f->started) {
			getcontext(&f->ctx); // here, not at growth: realloc moves the struct its fpregs point into
			f->ctx.uc_stack.ss_sp = f->stack;
			f->ctx.uc_stack.ss_size = stack_bytes;
			f->ctx.uc_link = &sched;
			makecontext(&f->ctx, fiber_main, 0);
		}
		f->state = READY;
		f->lin = i;
		f->tid = {i % block_dim.x, (i / block_dim.x) % block_dim.y, i / (block_dim.x * block_dim.y)};
	}
	for (;;) {
		for (int i = 0; i < nfibers; i++) {
			if (fibers[i].state == READY) resume(&fibers[i]);
		}
		int live = 0, atBlock = 0;
		for (int i = 0; i < nfibers; i++) {
			live += fibers[i].state != DONE;
			atBlock += fibers[i].state == WAIT_BLOCK;
		}
		if (live == 0) return 0;
		if (atBlock == live) {
			for (int i = 0; i < nfibers; i++)
				if (fibers[i].state == WAIT_BLOCK) fibers[i].state = READY;
			continue;
		}
		bool released = false;
		for (int w = 0; w * 32 < nfibers; w++) {
			int lo = w * 32, hi = lo + 32 < nfibers ? lo + 32 : nfibers, wl = 0, ww = 0;
			for (int i = lo; i < hi; i++) {
				wl += fibers[i].state != DONE;
				ww += fibers[i].state == WAIT_WARP;
			}
			if (wl > 0 && ww == wl) {
				for (int i = lo; i < hi; i++)
					if (fibers[i].state == WAIT_WARP) fibers[i].state = READY;
				released = true;
			}
		}
		if (!released) {
			for (int i = 0; i < nfibers; i++) fibers[i].started = false;
			return -1;
		}
	}
}

// launch runs the grid; 0, or an error message's length in err.
static int launch(void (*t)(void **), const unsigned *grid, const unsigned *block, unsigned shared, void **a, char *err,
                  int errlen) {
	int n = block[0] * block[1] * block[2];
	if (n <= 0 || n > 1024) return snprintf(err, errlen, "block of %d threads (1 to 1024)", n);
	if (n > cap) {
		fibers = (fiber *)realloc(fibers, n * sizeof(fiber));
		for (int i = cap; i < n; i++) {
			fibers[i].stack = (char *)malloc(stack_bytes);
			fibers[i].started = false;
		}
		cap = n;
	}
	if (shared > dyn_cap) {
		dyn_smem = (char *)realloc(dyn_smem, shared);
		dyn_cap = shared;
	}
	nfibers = n;
	tramp = t;
	args = a;
	block_dim = {block[0], block[1], block[2]};
	grid_dim = {grid[0], grid[1], grid[2]};
	for (unsigned z = 0; z < grid[2]; z++)
		for (unsigned y = 0; y < grid[1]; y++)
			for (unsigned x = 0; x < grid[0]; x++) {
				block_idx = {x, y, z};
				memset(dyn_smem, 0xff, shared); // shared memory starts as garbage on the GPU too
				if (run_block() != 0)
					return snprintf(err, errlen, "block (%u,%u,%u): a barrier some live thread never reaches",
					                x, y, z);
			}
	return 0;
}

template <typename... A, size_t... I>
static void call_impl(void (*f)(A...), void **a, std::index_sequence<I...>) {
	f(*(std::remove_reference_t<A> *)a[I]...);
}

// call unpacks cuLaunchKernel's argument pointers into f's parameters.
template <typename... A> static void call(void (*f)(A...), void **a) { call_impl(f, a, std::index_sequence_for<A...>{}); }

// The lane a shuffle reads; its own when out of range.
template <typename T> static T exchange(T v, int src) {
	memcpy(&cur->slot, &v, sizeof v);
	wait(WAIT_WARP);
	T r = v;
	int base = cur->lin & ~31;
	if (src >= 0 && base + src < nfibers) memcpy(&r, &fibers[base + src].slot, sizeof r);
	wait(WAIT_WARP);
	return r;
}

} // namespace emu

#define threadIdx (emu::cur->tid)
#define blockIdx (emu::block_idx)
#define blockDim (emu::block_dim)
#define gridDim (emu::grid_dim)
#define warpSize 32

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __shared__ static
#define DYN_SHARED(T, name) T *name = (T *)emu::dyn_smem // extern __shared__ T name[] on the GPU

static inline void __syncthreads() { emu::wait(emu::WAIT_BLOCK); }
static inline void __syncwarp(unsigned = 0xffffffff) { emu::wait(emu::WAIT_WARP); }
static inline unsigned __activemask() { return 0xffffffff; }

static inline int emu_lane() { return emu::cur->lin & 31; }

template <typename T> static inline T __shfl_sync(unsigned, T v, int src, int width = 32) {
	int lane = emu_lane();
	return emu::exchange(v, (lane / width) * width + (src % width));
}
template <typename T> static inline T __shfl_xor_sync(unsigned, T v, int m, int width = 32) {
	int lane = emu_lane(), s = lane ^ m;
	return emu::exchange(v, s / width == lane / width ? s : lane);
}
template <typename T> static inline T __shfl_down_sync(unsigned, T v, unsigned d, int width = 32) {
	int lane = emu_lane();
	return emu::exchange(v, lane % width + (int)d < width ? lane + (int)d : lane);
}
template <typename T> static inline T __shfl_up_sync(unsigned, T v, unsigned d, int width = 32) {
	int lane = emu_lane();
	return emu::exchange(v, lane % width >= (int)d ? lane - (int)d : lane);
}

static inline unsigned __ballot_sync(unsigned, int pred) {
	unsigned bits = 0;
	for (int l = 0; l < 32; l++) {
		int p = emu::exchange(pred ? 1 : 0, l);
		if (p) bits |= 1u << l;
	}
	return bits;
}
static inline int __any_sync(unsigned m, int pred) { return __ballot_sync(m, pred) != 0; }
static inline int __all_sync(unsigned m, int pred) {
	int alive = 0;
	for (int l = 0; l < 32; l++) alive += emu::exchange(1, l) ? 1 : 0;
	return __builtin_popcount(__ballot_sync(m, pred)) == alive;
}

// Atomics: one OS thread runs every fiber, and a fiber switches only at a
// barrier, so a read-modify-write is atomic as it stands.
template <typename T, typename U> static inline T atomicAdd(T *p, U v) {
	T old = *p;
	*p = old + (T)v;
	return old;
}
template <typename T, typename U> static inline T atomicMax(T *p, U v) {
	T old = *p;
	if ((T)v > old) *p = (T)v;
	return old;
}
template <typename T, typename U> static inline T atomicMin(T *p, U v) {
	T old = *p;
	if ((T)v < old) *p = (T)v;
	return old;
}
template <typename T, typename U> static inline T atomicExch(T *p, U v) {
	T old = *p;
	*p = (T)v;
	return old;
}
template <typename T, typename U, typename V> static inline T atomicCAS(T *p, U cmp, V v) {
	T old = *p;
	if (old == (T)cmp) *p = (T)v;
	return old;
}

template <typename A, typename B> static inline auto min(A a, B b) -> decltype(a + b) { return a < b ? a : b; }
template <typename A, typename B> static inline auto max(A a, B b) -> decltype(a + b) { return a > b ? a : b; }

static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
// __expf and __logf: glibc declares them (the same functions as expf, logf).
static inline float __fdividef(float a, float b) { return a / b; }
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __saturatef(float x) { return x < 0 ? 0 : x > 1 ? 1 : x; }
template <typename To, typename From> static inline To emu_bits(From x) {
	To y;
	memcpy(&y, &x, sizeof y);
	return y;
}
static inline int __float_as_int(float x) { return emu_bits<int>(x); }
static inline float __int_as_float(int i) { return emu_bits<float>(i); }
static inline unsigned __float_as_uint(float x) { return emu_bits<unsigned>(x); }
static inline float __uint_as_float(unsigned i) { return emu_bits<float>(i); }
template <typename T> static inline T __ldg(const T *p) { return *p; }

// bfloat16 as cuda_bf16.h declares it: storage, round-to-nearest-even
// conversion from float, exact conversion to float.
struct __nv_bfloat16 {
	unsigned short x;
};
struct __nv_bfloat162 {
	__nv_bfloat16 x, y;
};
static inline __nv_bfloat16 __float2bfloat16(float f) {
	unsigned u = __float_as_uint(f);
	__nv_bfloat16 b;
	if ((u & 0x7fffffff) > 0x7f800000) {
		b.x = (unsigned short)((u >> 16) | 0x40); // quiet NaN
		return b;
	}
	u += 0x7fff + ((u >> 16) & 1);
	b.x = (unsigned short)(u >> 16);
	return b;
}
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __float2bfloat16(f); }
static inline float __bfloat162float(__nv_bfloat16 b) { return __uint_as_float((unsigned)b.x << 16); }

// emu_launch is the module's entry: fake.inc's cuLaunchKernel calls it
// with the kernel's trampoline.
extern "C" int emu_launch(void (*t)(void **), const unsigned *grid, const unsigned *block, unsigned shared, void **a,
                          char *err, int errlen) {
	return emu::launch(t, grid, block, shared, a, err, errlen);
}
