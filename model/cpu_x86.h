// CPUID checks shared by the products of our own (gemm_amx.c,
// gemm_avx512.c), x86-64 with GCC only.
#ifndef CPU_X86_H
#define CPU_X86_H
#include <cpuid.h>

// os_avx512: the CPU has OSXSAVE and the OS saves the AVX-512 state
// (XCR0's SSE, AVX, opmask and ZMM bits), so AVX-512 code may run once
// CPUID says the CPU has it.
static inline int os_avx512(void) {
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c >> 27 & 1)) return 0; // OSXSAVE
	unsigned lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return (lo & 0xe6) == 0xe6;
}

#endif
