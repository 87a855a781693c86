// An update over the whole parameter vector, in its runs with and
// without weight decay, as one call: cut across the model's thread pool
// when optim.UsePool gave it one (model.PoolRanges), on the caller when
// not. Each value's update is its own (adam.c, sgd.c), so the cut changes
// no bits; the runs' g-g sums only say whether some gradient was not
// finite.
#include <stddef.h>

#include "adam.h"

typedef float (*range_fn)(void *ctx, size_t lo, size_t hi);
typedef float (*pool_fn)(size_t n, size_t grain, range_fn fn, void *ctx);

// UPDATE_GRAIN: the fewest values a thread takes, as the pool's own
// element-wise passes (GRAIN in model/par.c): an update reads and writes
// 12 to 28 bytes a value, so 16K values are tens of microseconds, several
// times what waking a spinning pool thread costs. ResNet-20's SGD is 16
// parts at 16 threads.
#define UPDATE_GRAIN (1 << 14)

struct upd {
	int adam;
	float *p, *m, *v; // SGD: m its momentum buffer (NULL: none), v unused
	const float *g;
	const struct k_seg *segs; // NULL (nsegs 0): one run, decaying
	size_t nsegs;
	float b1, b2, c1, c2, step, rbc2, eps, shrink, l2; // Adam; shrink and l2 for decaying runs
	float lr, wd, mu;                                  // SGD; wd for decaying runs
	int mode;
};

static float run1(const struct upd *u, size_t a, size_t b, int decay) {
	if (a >= b) return 0;
	if (u->adam)
		return k_adam(u->p + a, u->g + a, u->m + a, u->v + a, b - a, u->b1, u->b2, u->c1, u->c2, u->step, u->rbc2,
		              u->eps, decay ? u->shrink : 1.0f, decay ? u->l2 : 0.0f);
	return k_sgd(u->p + a, u->g + a, u->m ? u->m + a : NULL, b - a, u->lr, decay ? u->wd : 0.0f, u->mu, u->mode);
}

// upd_range updates [lo, hi): the part of each run that lies in it, in
// run order.
static float upd_range(void *ctx, size_t lo, size_t hi) {
	const struct upd *u = ctx;
	if (!u->segs) return run1(u, lo, hi, 1);
	float bad = 0;
	size_t start = 0;
	for (size_t s = 0; s < u->nsegs && start < hi; s++) {
		size_t a = start > lo ? start : lo, b = u->segs[s].end < hi ? u->segs[s].end : hi;
		if (a < b) bad += run1(u, a, b, u->segs[s].decay);
		start = u->segs[s].end;
	}
	return bad;
}

static float update(void *pool, const struct upd *u, size_t n) {
	if (!pool) return upd_range((void *)u, 0, n);
	return ((pool_fn)pool)(n, UPDATE_GRAIN, upd_range, (void *)u);
}

float k_adam_update(void *pool, float *p, const float *g, float *m, float *v, size_t n, const struct k_seg *segs,
                    size_t nsegs, float b1, float b2, float c1, float c2, float step, float rbc2, float eps,
                    float shrink, float l2) {
	struct upd u = {.adam = 1, .p = p, .g = g, .m = m, .v = v, .segs = segs, .nsegs = nsegs,
	                .b1 = b1, .b2 = b2, .c1 = c1, .c2 = c2, .step = step, .rbc2 = rbc2, .eps = eps,
	                .shrink = shrink, .l2 = l2};
	return update(pool, &u, n);
}

float k_sgd_update(void *pool, float *p, const float *g, float *buf, size_t n, const struct k_seg *segs, size_t nsegs,
                   float lr, float wd, float mu, int mode) {
	struct upd u = {.p = p, .g = g, .m = buf, .segs = segs, .nsegs = nsegs, .lr = lr, .wd = wd,
	                .mu = mu, .mode = mode};
	return update(pool, &u, n);
}

// SUMSQ_BLOCK: the values of a block of the sum of squares, each block's
// sum its own (k_sumsq's four interleaved partials) and the blocks' sums
// added in block order: fixed by the length alone, so the norm has the
// same bits at any thread count, and a vector of one block (under 64K
// values) k_sumsq's bits as before. The norm of clip_grad_norm_ ran on
// the caller, 30M values a step for the GPT: serial work ahead of every
// thread.
#define SUMSQ_BLOCK (1 << 16)

struct sq {
	const float *x;
	size_t n;
	double *out;
};

static float sq_blocks(void *ctx, size_t lo, size_t hi) {
	const struct sq *q = ctx;
	for (size_t b = lo; b < hi; b++) {
		size_t a = b * SUMSQ_BLOCK, e = a + SUMSQ_BLOCK < q->n ? a + SUMSQ_BLOCK : q->n;
		q->out[b] = k_sumsq(q->x + a, e - a);
	}
	return 0;
}

// SUMSQ_STACK: the blocks a pass sums, their sums on the stack (4 KB,
// 32M values); a longer vector takes a pass per SUMSQ_STACK blocks.
#define SUMSQ_STACK 512
static size_t sumsq_group = SUMSQ_STACK;

// k_sumsq_group sets the blocks a pass sums (1 to SUMSQ_STACK; 0: the
// default), for a test of the passes' edges.
void k_sumsq_group(size_t g) { sumsq_group = g < 1 || g > SUMSQ_STACK ? SUMSQ_STACK : g; }

// k_sumsq_pool is the sum of squares of n floats in double, by blocks
// (above), across the pool when there is one.
double k_sumsq_pool(void *pool, const float *x, size_t n) {
	size_t nb = (n + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK;
	if (nb <= 1) return k_sumsq(x, n);
	double out[SUMSQ_STACK], s = 0;
	for (size_t b0 = 0; b0 < nb; b0 += sumsq_group) {
		size_t k = nb - b0 < sumsq_group ? nb - b0 : sumsq_group;
		struct sq q = {x + b0 * SUMSQ_BLOCK, n - b0 * SUMSQ_BLOCK, out};
		if (pool)
			((pool_fn)pool)(k, 1, sq_blocks, &q);
		else
			sq_blocks(&q, 0, k);
		for (size_t b = 0; b < k; b++) s += out[b];
	}
	return s;
}

struct scale {
	float *x;
	float c;
};

static float scale_range(void *ctx, size_t lo, size_t hi) {
	const struct scale *s = ctx;
	for (size_t i = lo; i < hi; i++) s->x[i] *= s->c;
	return 0;
}

// k_scale_pool multiplies n floats by c in place (clipping's scale; each
// value's own product, so any cut gives the same bits).
void k_scale_pool(void *pool, float *x, size_t n, float c) {
	struct scale s = {x, c};
	if (pool)
		((pool_fn)pool)(n, UPDATE_GRAIN, scale_range, &s);
	else
		scale_range(&s, 0, n);
}
