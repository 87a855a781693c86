// A lead, not a kernel of train's: fp32 matrix products as bf16x3 on
// Intel AMX (Sapphire and Emerald Rapids), measured against OpenBLAS's
// SGEMM on the GPT's product shapes, one thread, in one run.
//
// Each fp32 value x is split into three bf16 parts, x = h + m + l (each
// the round-to-nearest bf16 of what is left), and A B is the sum of the
// six products whose parts' order adds up to at most 2^-16 of h h
// (h h, h m, m h, h l, m m, l h), one TDPBF16PS stream over a K six times
// longer. The corrections go first and h h last, so they accumulate in
// small partial sums and the large ones see only K additions, as SGEMM's
// do. AMX's products of bf16 pairs are exact in fp32.
//
//   gcc -O3 -march=sapphirerapids scripts/bench/amx-bf16x3.c -o /tmp/amx -lopenblas -lm
//   OPENBLAS_CORETYPE=Cooperlake OPENBLAS_NUM_THREADS=1 NC=128 /tmp/amx
//
// Prints, per shape: SGEMM's GFLOP/s, this one's with its packing (the
// split into bf16 parts and the tile layouts) and without it, and the
// mean error against a float64 sum over 4,096 sampled entries (as a
// fraction of the sum of |a b|), for both. On the Emerald Rapids core of
// the 34th session (family 6 model 207, 2 vCPUs): this kernel (2x2 tiles
// of 16x16, panels of NC columns) reached 165 to 210 GFLOP/s without
// packing (1.1 to 1.3x SGEMM), 0.7 to 1.07x with it (packing 16 to 46% of
// its time, the scalar VNNI scatter most of it), and its error was 3.2e-9
// to 3.8e-9 against SGEMM's 8.3e-9 to 1.7e-8 (7.2e-9 with the six
// products interleaved chunk by chunk, no faster). AMX's own rate on that
// VM swung from one run to the next, a few seconds apart: TDPBF16PS on
// registers alone 1.0 to 2.3 TFLOP/s of bf16 (six products: 1.1 to 2.6x
// SGEMM), a 2x2 block over data held in L1 (32x32 outputs, K 256) 0.7 to
// 2.7, while OpenBLAS's SGEMM held 145 to 157 GFLOP/s (a likely cause: a
// physical core's two hyperthreads share one AMX unit, and the host's
// other one is not ours to see). So on
// that machine no tuning of this kernel could be measured, nor would
// train's step be steady on it. Blocking K (KC 64 to 256, the A block in
// L1, C tiles through a buffer) did not move the kernel's 165 to 210.
// Left: packing the weights once a step, vectorised VNNI packing,
// prefetching; at best about 2x SGEMM, so about 1.2 to 1.5x on the GPT's
// step, on AMX cores only, and with other bits than OpenBLAS's.
#include <immintrin.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <time.h>
#include <cblas.h>
typedef struct { uint8_t palette, start; uint8_t r[14]; uint16_t colsb[16]; uint8_t rows[16]; } __attribute__((packed)) cfg_t;
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}

// split16: 16 floats into three bf16 vectors (RNE each).
static inline void split16(__m512 x, __m256i *h, __m256i *m, __m256i *l) {
  __m256bh a = _mm512_cvtneps_pbh(x);
  __m512 r = _mm512_sub_ps(x, _mm512_cvtpbh_ps(a));
  __m256bh b = _mm512_cvtneps_pbh(r);
  r = _mm512_sub_ps(r, _mm512_cvtpbh_ps(b));
  __m256bh c = _mm512_cvtneps_pbh(r);
  *h = (__m256i)a; *m = (__m256i)b; *l = (__m256i)c;
}
// packA: A (M x K, lda) -> 3 parts, each Mp x Kp bf16 row-major (zero pad).
static void packA(const float *A, int M, int K, int lda, uint16_t *P, int Mp, int Kp) {
  size_t part = (size_t)Mp * Kp;
  memset(P, 0, 3 * part * 2);
  for (int i = 0; i < M; i++) {
    int k = 0;
    for (; k + 16 <= K; k += 16) {
      __m256i h, m, l; split16(_mm512_loadu_ps(A + (size_t)i*lda + k), &h, &m, &l);
      _mm256_storeu_si256((void*)(P + (size_t)i*Kp + k), h);
      _mm256_storeu_si256((void*)(P + part + (size_t)i*Kp + k), m);
      _mm256_storeu_si256((void*)(P + 2*part + (size_t)i*Kp + k), l);
    }
    if (k < K) {
      __mmask16 mk = (1u << (K - k)) - 1;
      __m256i h, m, l; split16(_mm512_maskz_loadu_ps(mk, A + (size_t)i*lda + k), &h, &m, &l);
      _mm256_mask_storeu_epi16(P + (size_t)i*Kp + k, mk, h);
      _mm256_mask_storeu_epi16(P + part + (size_t)i*Kp + k, mk, m);
      _mm256_mask_storeu_epi16(P + 2*part + (size_t)i*Kp + k, mk, l);
    }
  }
}
// packB: B (K x N, ldb) -> 3 parts, each [Np/16][Kp/2][16][2] bf16 (VNNI).
static void packB(const float *B, int K, int N, int ldb, uint16_t *P, int Kp, int Np) {
  size_t part = (size_t)Kp * Np;
  memset(P, 0, 3 * part * 2);
  for (int k = 0; k < K; k++)
    for (int j = 0; j < N; j += 16) {
      int w = N - j < 16 ? N - j : 16;
      __mmask16 mk = (1u << w) - 1; if (w == 16) mk = 0xffff;
      __m256i hm[3]; split16(_mm512_maskz_loadu_ps(mk, B + (size_t)k*ldb + j), &hm[0], &hm[1], &hm[2]);
      for (int p = 0; p < 3; p++) {
        uint16_t t[16]; _mm256_storeu_si256((void*)t, hm[p]);
        uint16_t *d = P + p*part + (size_t)(j/16) * Kp * 16 + (size_t)(k/2) * 32 + (k & 1);
        for (int c = 0; c < w; c++) d[2*c] = t[c];
      }
    }
}
static const int pa[6] = {1, 0, 2, 1, 0, 0}, pb[6] = {0, 1, 0, 1, 2, 0};
// kernel: C (M x N, ldc) = packed A * packed B, 32x32 blocks of 2x2 tiles.
static void amx_gemm(const uint16_t *PA, const uint16_t *PB, float *C, int M, int N, int ldc, int Mp, int Kp, int Np) {
  size_t partA = (size_t)Mp * Kp, partB = (size_t)Kp * Np;
  float buf[32*32] __attribute__((aligned(64)));
  int NC = getenv("NC") ? atoi(getenv("NC")) : 128;
  for (int jj = 0; jj < Np; jj += NC)
  for (int i = 0; i < Mp; i += 32)
    for (int j = jj; j < Np && j < jj + NC; j += 32) {
      int two_i = i + 16 < Mp, two_j = j + 16 < Np;
      _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
      for (int t = 0; t < 6; t++) {
        const uint16_t *a = PA + pa[t]*partA + (size_t)i*Kp, *b = PB + pb[t]*partB + (size_t)(j/16)*Kp*16;
        for (int k = 0; k < Kp; k += 32) {
          _tile_loadd(4, a + k, Kp*2);
          _tile_loadd(6, b + (size_t)(k/2)*32, 64);
          _tile_dpbf16ps(0, 4, 6);
          if (two_j) { _tile_loadd(7, b + (size_t)Kp*16 + (size_t)(k/2)*32, 64); _tile_dpbf16ps(1, 4, 7); }
          if (two_i) { _tile_loadd(5, a + (size_t)16*Kp + k, Kp*2); _tile_dpbf16ps(2, 5, 6); if (two_j) _tile_dpbf16ps(3, 5, 7); }
        }
      }
      _tile_stored(0, buf, 128); _tile_stored(1, buf + 16, 128); _tile_stored(2, buf + 16*32, 128); _tile_stored(3, buf + 16*32 + 16, 128);
      for (int r = 0; r < 32 && i + r < M; r++)
        for (int c = 0; c < 32 && j + c < N; c++) C[(size_t)(i+r)*ldc + j + c] = buf[r*32 + c];
    }
}
static int up(int x, int m) { return (x + m - 1) / m * m; }
int main(int argc, char **argv) {
  if (syscall(SYS_arch_prctl, 0x1023, 18)) { puts("no AMX"); return 1; }
  cfg_t cf; memset(&cf, 0, sizeof cf); cf.palette = 1;
  for (int i = 0; i < 8; i++) { cf.rows[i] = 16; cf.colsb[i] = 64; }
  _tile_loadconfig(&cf);
  int shapes[][3] = {{1024,1152,384},{1024,384,384},{1024,1536,384},{1024,384,1536},{384,1536,1024},{1024,1024,1024},{1024,50257,384},{1000,77,300}};
  for (int s = 0; s < (int)(sizeof shapes / sizeof shapes[0]); s++) {
    int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
    int Mp = up(M, 32), Np = up(N, 32), Kp = up(K, 32);
    float *A = malloc((size_t)M*K*4), *B = malloc((size_t)K*N*4), *C = malloc((size_t)M*N*4), *R = malloc((size_t)M*N*4);
    uint16_t *PA = aligned_alloc(64, (size_t)3*Mp*Kp*2), *PB = aligned_alloc(64, (size_t)3*Kp*Np*2);
    srand48(s + 1);
    for (size_t i = 0; i < (size_t)M*K; i++) A[i] = drand48()*2-1;
    for (size_t i = 0; i < (size_t)K*N; i++) B[i] = drand48()*2-1;
    // error vs double, on 64 sampled entries
    packA(A, M, K, K, PA, Mp, Kp); packB(B, K, N, N, PB, Kp, Np); amx_gemm(PA, PB, C, M, N, N, Mp, Kp, Np);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1, A, K, B, N, 0, R, N);
    double ea = 0, eb = 0;
    for (int q = 0; q < 4096; q++) {
      int i = lrand48() % M, j = lrand48() % N; double d = 0, ab = 0;
      for (int k = 0; k < K; k++) { d += (double)A[(size_t)i*K+k]*B[(size_t)k*N+j]; ab += fabs((double)A[(size_t)i*K+k]*B[(size_t)k*N+j]); }
      ea += fabs(C[(size_t)i*N+j] - d) / ab; eb += fabs(R[(size_t)i*N+j] - d) / ab;
    }
    double f = 2.0*M*N*K, best[3] = {1e9, 1e9, 1e9};
    for (int r = 0; r < 5; r++) {
      double t0 = now(); cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1, A, K, B, N, 0, R, N);
      double t1 = now(); packA(A, M, K, K, PA, Mp, Kp); packB(B, K, N, N, PB, Kp, Np);
      double t2 = now(); amx_gemm(PA, PB, C, M, N, N, Mp, Kp, Np); double t3 = now();
      best[0] = fmin(best[0], t1 - t0); best[1] = fmin(best[1], t2 - t1); best[2] = fmin(best[2], t3 - t2);
    }
    printf("%5d x %5d x %5d: SGEMM %6.1f GFLOP/s; bf16x3 AMX %6.1f (kernel %6.1f, pack %.0f%%) = %.2fx; mean |err|/sum|ab|: AMX %.2e SGEMM %.2e\n",
      M, N, K, f/best[0]/1e9, f/(best[1]+best[2])/1e9, f/best[2]/1e9, 100*best[1]/(best[1]+best[2]), best[0]/(best[1]+best[2]), ea/4096, eb/4096);
    free(A); free(B); free(C); free(R); free(PA); free(PB);
  }
}
