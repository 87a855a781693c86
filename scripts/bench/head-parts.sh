#!/usr/bin/env bash
# What cutting a product with a large B into row parts costs in total
# work: the GPT's tied head (logits = X W^T and dX = dlogits W, X 1024 x 384,
# W 50257 x 384, GPT-2's vocabulary at the bench's 4 windows of 256) as
# one OpenBLAS call, then as 2 to 32 calls of a part of the rows each, all
# on one thread in turn. model/par.c's k_sgemm cuts a large product into
# 2T row parts across T threads, and each part's call packs the whole of
# B again: the total here is what T threads share. Then the logits in
# column blocks, as par.c cuts them since: the total stays one call's.
#
#   scripts/bench/head-parts.sh        (needs gcc and libopenblas-dev)
set -euo pipefail
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/head.c" <<'C'
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(void) {
	int M = 1024, K = 384, N = 50257;
	float *X = malloc(sizeof(float) * M * K), *W = malloc(sizeof(float) * (size_t)N * K);
	float *Y = malloc(sizeof(float) * (size_t)M * N), *G = malloc(sizeof(float) * (size_t)M * N), *DX = malloc(sizeof(float) * M * K);
	for (size_t i = 0; i < (size_t)M * K; i++) X[i] = rand() / (float)RAND_MAX;
	for (size_t i = 0; i < (size_t)N * K; i++) W[i] = rand() / (float)RAND_MAX;
	for (size_t i = 0; i < (size_t)M * N; i++) Y[i] = 0, G[i] = rand() / (float)RAND_MAX;
	int parts[] = {1, 2, 4, 8, 16, 32};
	for (int rep = 0; rep < 3; rep++)
		for (int pi = 0; pi < 6; pi++) {
			int P = parts[pi];
			double t0 = now();
			for (int p = 0; p < P; p++) {
				int r0 = p * M / P, r1 = (p + 1) * M / P;
				cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, r1 - r0, N, K, 1, X + r0 * K, K, W, K, 0, Y + (size_t)r0 * N, N);
			}
			double t1 = now();
			for (int p = 0; p < P; p++) {
				int r0 = p * M / P, r1 = (p + 1) * M / P;
				cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, K, N, 1, G + (size_t)r0 * N, N, W, K, 0, DX + r0 * K, K);
			}
			double t2 = now();
			if (rep > 0) printf("round %d, %2d row parts: logits %.1f ms, dX %.1f ms\n", rep, P, (t1 - t0) * 1e3, (t2 - t1) * 1e3);
		}
	// The logits in column blocks of 2048 (par.c's COLBLOCK): each call
	// packs its slice of W, and X again.
	for (int rep = 0; rep < 2; rep++) {
		double t0 = now();
		for (int c0 = 0; c0 < N; c0 += 2048) {
			int c1 = c0 + 2048 < N ? c0 + 2048 : N;
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, c1 - c0, K, 1, X, K, W + (size_t)c0 * K, K, 0, Y + c0, N);
		}
		printf("round %d, %d column blocks of 2048: logits %.1f ms\n", rep + 1, (N + 2047) / 2048, (now() - t0) * 1e3);
	}
	return 0;
}
C
inc=$(dirname "$(find /usr/include -name cblas.h -path '*openblas*' | head -1)")
gcc -O2 -I"$inc" "$dir/head.c" -o "$dir/head" -lopenblas
echo "# OpenBLAS one thread, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-(unset)}; round 0 (page faults) not shown"
OPENBLAS_NUM_THREADS=1 "$dir/head"
