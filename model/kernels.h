// Element-wise kernels of BatchNorm and the residual join, in C so the
// compiler vectorises them (Go does not). Activations are NHWC: rows of
// C channel values.
#include <stddef.h>

void k_bn_stats(const float *x, size_t rows, size_t C, double *s);
int k_bn_wide(int on);
void k_affine(float *y, const float *x, const float *mean, const float *scale, const float *beta, size_t rows, size_t C, int relu);
void k_bn_grad_sums(const float *x, const float *dy, size_t rows, size_t C, const float *mhi, const float *mlo,
                    const float *invstd, const float *scale, const float *beta, int relu, double *s);
void k_bn_dx(float *dx, const float *dy, const float *x, size_t rows, size_t C, const float *mean,
             const float *a, const float *b, const float *c, const float *scale, const float *beta, int relu);
void k_join(float *y, const float *x, const float *mean, const float *scale, const float *beta, const float *z,
            const float *zmean, const float *zscale, const float *zbeta, size_t rows, size_t C);
void k_relu_mask(float *g, const float *dy, const float *y, size_t n);
void k_im2col(float *cols, const float *x, size_t n, size_t C, size_t h, size_t w, size_t k,
              size_t stride, size_t pad, size_t oh, size_t ow);

// GPT kernels (kernels_gpt.c).
#include <stdint.h>
void k_xent(float *d, const float *logits, const int32_t *labels, size_t rows, size_t V, float scale,
            double *loss, int64_t *correct);
void k_gelu(float *y, const float *x, size_t n);
void k_gelu_backward(float *dx, const float *dy, const float *x, size_t n);
void k_layernorm(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b,
                 size_t rows, size_t C, float eps);
void k_layernorm_backward(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                          const float *mean, const float *rstd, size_t rows, size_t C, int add);
void k_causal_softmax(float *p, size_t T);
void k_causal_softmax_backward(float *dp, const float *p, size_t T, float scale);
void k_attention_forward_par(const float *qkv, float *o, float *p, size_t n, size_t t, size_t c, size_t heads,
                             float scale);
void k_attention_backward_par(float *dqkv, const float *dout, const float *qkv, const float *p, size_t n, size_t t,
                              size_t c, size_t heads, float scale);
void k_colsum(float *db, const float *dy, size_t rows, size_t C);
void k_colsum_cols(float *db, const float *dy, size_t rows, size_t C, size_t c0, size_t c1);
void k_layernorm_sums(float *dw, float *db, const float *dy, const float *x, const float *mean,
                      const float *rstd, size_t rows, size_t C, size_t c0, size_t c1);
void k_add(float *y, const float *a, const float *b, size_t n);
void k_embed_backward(float *dwte, float *dwpe, const float *dy, const float *ids, size_t rows, size_t T, size_t C);
void k_embed_rows(float *y, const float *ids, const float *wte, const float *wpe, size_t r0, size_t r1, size_t T,
                  size_t C);
void k_embed_backward_cols(float *dwte, float *dwpe, const float *dy, const float *ids, size_t rows, size_t T,
                           size_t C, size_t c0, size_t c1);
void k_embed_par(float *y, const float *ids, const float *wte, const float *wpe, size_t rows, size_t T, size_t C);
void k_embed_backward_par(float *dwte, float *dwpe, const float *dy, const float *ids, size_t rows, size_t T,
                          size_t C);

// The thread pool and the passes that run on it (par.c).
// MAXT: the most threads a pool takes (--threads above it is refused).
#define MAXT 256
int k_set_cpus(int n);
int k_set_threads(int n);
int k_pin(void);
int k_pinned_cpu(int w);
void k_set_sgemm(void *f);
// Float32 products of our own on the AVX-512 FMA units (gemm_avx512.c).
int k_avx512_enable(int on);
int k_avx512_on(void);
int k_sgemm_avx512(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
                   const float *b, size_t ldb, float beta, float *c, size_t ldc);

// AMX float32 products (gemm_amx.c).
int k_amx_enable(int on);
int k_amx_on(void);
int k_sgemm_amx_par(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
                    const float *b, size_t ldb, float beta, float *c, size_t ldc);
typedef void (*k_task)(void *ctx, size_t lo, size_t hi, int w);
void k_run(size_t units, k_task fn, void *ctx);
int k_pool_size(void);
int k_sgemm_amx(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
                const float *b, size_t ldb, float beta, float *c, size_t ldc);
void k_pass_profile(int on);
int k_simulate_threads(int T);
void k_sim_check(int units, int T, double us, int *runs, int *who, double *longest, double *serial, double *span);
void k_spin_pass(int units, double us);
void k_steal_read(int on);
void k_set_gemm_cols(int on);
void k_wk_cut(size_t o, size_t c, int along_inputs, int T, size_t *bo, size_t *bc);
int k_pass_profile_entry(int i, void **fn, size_t *units, unsigned long *n, double *total, double *wait,
                         double *work, double *late, double *busy, unsigned long *workers);
int k_pass_gap_entry(int i, void **from, size_t *from_units, void **to, size_t *to_units, unsigned long *n,
                     double *time);
int k_buffers_misaligned(void);
int k_pool_check(int passes, int units, unsigned seed);
void k_sgemm1(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda,
              const float *b, size_t ldb, float beta, float *c, size_t ldc);
void k_gemm_speeds(const double *s, int T);
int k_cut_rows(size_t units, size_t parts, size_t fewest, size_t *at);
size_t k_tile_parts(size_t blocks, size_t T, size_t most);
typedef float (*k_range_fn)(void *ctx, size_t lo, size_t hi);
float k_pool_ranges(size_t n, size_t grain, k_range_fn fn, void *ctx);
void k_learn_check(size_t m, const double *t, const int *who, double *s);
void k_sgemm(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float *a, size_t lda, const float *b,
             size_t ldb, float beta, float *c, size_t ldc);
// One product's arguments, for k_sgemm_pair.
struct k_gemm {
	int ta, tb;
	size_t m, n, k;
	float alpha;
	const float *a;
	size_t lda;
	const float *b;
	size_t ldb;
	float beta;
	float *c;
	size_t ldc;
};
void k_sgemm_pair(struct k_gemm x, struct k_gemm y);
void k_pair_unit(size_t xparts, size_t yunits, size_t u, int *which, size_t *i);
void k_permute_weights(float *wt, const float *w, size_t o0, size_t o1, size_t c, size_t kk);
void k_avgpool(float *y, const float *x, size_t n, size_t h, size_t w, size_t C, size_t kh, size_t kw, size_t oh,
               size_t ow, float inv);
void k_avgpool_dx(float *dx, const float *dy, size_t n, size_t h, size_t w, size_t C, size_t kh, size_t kw, size_t oh,
                  size_t ow, float inv);
void k_avgpool_par(int grad, float *y, const float *x, size_t n, size_t h, size_t w, size_t C, size_t kh, size_t kw,
                   size_t oh, size_t ow, float inv);
void k_affine_par(float *y, const float *x, const float *mean, const float *scale, const float *beta, size_t rows,
                  size_t C, int relu);
void k_join_par(float *y, const float *x, const float *mean, const float *scale, const float *beta, const float *z,
                const float *zmean, const float *zscale, const float *zbeta, size_t rows, size_t C);
void k_bn_dx_par(float *dx, const float *dy, const float *x, size_t rows, size_t C, const float *mean, const float *a,
                 const float *b, const float *k, const float *scale, const float *beta, int relu);
void k_relu_mask_par(float *g, const float *dy, const float *y, size_t n);
void k_add_par(float *y, const float *a, const float *b, size_t n);
void k_gelu_par(float *y, const float *x, size_t n);
void k_zero_par(float *y, size_t n);
void k_scale_par(float *y, size_t n, float c);
void k_permute_chw_par(float *dst, const float *src, size_t n, size_t c, size_t hw, int to_hwc);
void k_copy_par(float *y, const float *x, size_t n);
void k_fill_rows_par(float *y, const float *b, size_t rows, size_t c);
void k_add_rows_par(float *y, const float *b, size_t rows, size_t c);
void k_layernorm_par(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b,
                     size_t rows, size_t C, float eps);
void k_layernorm_backward_par(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                              const float *mean, const float *rstd, size_t rows, size_t C, int add);
void k_colsum_par(float *db, const float *dy, size_t rows, size_t C);
void k_gelu_backward_par(float *dx, const float *dy, const float *x, size_t n);
void k_xent_par(float *d, const float *logits, const int32_t *labels, size_t rows, size_t V, float scale,
                double *loss, int64_t *correct);
void k_bn_stats_par(const float *x, size_t rows, size_t C, double *s, size_t per);
void k_bn_grad_sums_par(const float *x, const float *dy, size_t rows, size_t C, const float *mhi, const float *mlo,
                        const float *invstd, const float *scale, const float *beta, int relu, double *s);

// A convolution's shape: n images (h, w, c) to (oh, ow, o), a k x k
// kernel with stride and zero padding.
struct k_conv_shape {
	size_t n, c, h, w, o, oh, ow, k, stride, pad;
};

// Winograd F(m x m, 3x3), m = 2 or 4 (winograd.c; k_wino_forward in par.c).
// A plan cuts an image's h x w outputs into at most four classes, each a
// grid of ny x nx tiles of my x mx outputs from output (y0, x0): with m =
// 4 and up to 32 channels, a side may end in a tile of F(2)'s outputs
// instead of a padded 4 (winograd.c's runs).
struct k_wino_class {
	int my, mx;
	size_t y0, ny, x0, nx;
};
struct k_wino_plan {
	int n;
	struct k_wino_class c[4];
};
void k_wino_plan(struct k_wino_plan *p, size_t h, size_t w, size_t c, size_t o, int m);
size_t k_wino_points(const struct k_wino_plan *p);
size_t k_wino_ld(size_t c, size_t o);
// WINO_BLOCK: k_wino_weights transforms the forward's kernels in blocks
// of this many outputs and inputs.
#define WINO_BLOCK 16
void k_wino_weights(float *U, const float *w, float *wt, size_t o, size_t c, int flip, const struct k_wino_plan *p,
                    size_t p0, size_t p1, size_t c0, size_t c1, int stream);
int k_wino_own_mul(size_t C, size_t O);
void k_wino_mul(float *M, size_t ldm, const float *V, size_t ldv, const float *U, size_t T, size_t C, size_t O,
                size_t P);
int k_wino_own_dw(size_t C, size_t O);
void k_wino_dw_mul(float *D, const float *Mt, size_t lm, const float *V, size_t lv, size_t T, size_t C, size_t O,
                   size_t P, int add);
int k_wino_level(int cap);
// k_pre is a BatchNorm's apply and its ReLU, done by the input transform
// of the Winograd convolution that reads its output: that convolution's
// input is max((x - mean) * scale + beta, 0) per channel of x, k_affine's
// values, and the padding around it stays 0. Only where k_wino_fuses.
struct k_pre {
	const float *mean, *scale, *beta;
};
int k_wino_fuses(size_t C);
void k_wino_conv(float *y, const float *x, const float *U, size_t n, size_t h, size_t w, size_t C, size_t O, int add,
                 float *work, const struct k_wino_plan *p, const struct k_pre *pre);
size_t k_wino_work_floats(size_t n, size_t w, size_t C, size_t O, const struct k_wino_plan *p);
size_t k_wino_class_tiles(const struct k_wino_plan *p, int i);
long k_wino_wide_runs(void);
long k_wino_own_runs(void);
size_t k_wino_class_points(const struct k_wino_plan *p, int i);
void k_wino_spread(int grad, float *V, const float *x, size_t n, size_t h, size_t w, size_t C, const float *zero,
                   const struct k_wino_plan *p, int i, const struct k_pre *pre);
void k_wino_gather(float *y, const float *M, size_t n, size_t h, size_t w, size_t O, int add, float *sink,
                   const struct k_wino_plan *p, int i);
size_t k_wino_fwd_part(const struct k_conv_shape *s, int m);
int k_wino_forward(const struct k_conv_shape *s, float *y, const float *x, const float *w, float *wt, int flip,
                   float beta, int m, const float *pmean, const float *pscale, const float *pbeta, double *stats);
void k_wino_dw_part(float *dU, const float *x, const float *dy, size_t n, size_t h, size_t w, size_t C, size_t O,
                    float *work, const struct k_wino_plan *p, size_t sub, const struct k_pre *pre);
void k_wino_weights_grad(float *dwt, const float *dU, size_t o, size_t c, const struct k_wino_plan *p, size_t p0,
                         size_t p1, size_t c0, size_t c1);
void k_wino_dw(const struct k_conv_shape *s, float *dw, float *dwt, const float *dy, const float *x, int m,
               const float *pmean, const float *pscale, const float *pbeta);
size_t k_conv_part(size_t n, size_t per_image);
void k_conv_forward(const struct k_conv_shape *s, float *y, const float *x, const float *wt, float beta);
void k_conv_dw(const struct k_conv_shape *s, float *dw, const float *dy, const float *x);
void k_conv_dx(const struct k_conv_shape *s, float *dx, const float *dy, const float *wt, const float *wflip);
// 3x3 stride-1 padding-1 convolutions of 1 to 3 input channels and a
// multiple of 16 out, directly (conv_few.c; the passes in par.c).
void k_few_forward_part(float *y, const float *x, const float *wt, size_t n, size_t h, size_t w, size_t C, size_t O,
                        int add);
void k_few_dw_part(float *dwt, const float *x, const float *dy, size_t n, size_t h, size_t w, size_t C, size_t O);
void k_few_forward(const struct k_conv_shape *s, float *y, const float *x, const float *wt, float beta);
void k_few_dw(const struct k_conv_shape *s, float *dw, const float *dy, const float *x);
// Strided convolutions of multiples of 16 channels, directly on AVX-512
// (conv_direct.c; the passes in par.c).
int k_direct_ok(size_t c, size_t o, size_t k);
int k_direct_rows(int on);
void k_direct_forward_part(float *y, const float *x, const float *wk, const struct k_conv_shape *s, size_t n, int add);
void k_direct_dx_part(float *dx, const float *dy, const float *wd, const struct k_conv_shape *s, size_t n);
void k_direct_dw_part(float *part, const float *x, const float *dy, const struct k_conv_shape *s, size_t n);
void k_direct_forward(const struct k_conv_shape *s, float *y, const float *x, const float *w, float beta);
void k_direct_dx(const struct k_conv_shape *s, float *dx, const float *dy, const float *w);
void k_direct_dw(const struct k_conv_shape *s, float *dw, const float *dy, const float *x);
