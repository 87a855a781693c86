// Element-wise kernels of BatchNorm and the residual join, in C so the
// compiler vectorises them (Go does not). Activations are NHWC: rows of
// C channel values.
#include <stddef.h>

void k_bn_stats(const float *x, size_t rows, size_t C, double *s);
void k_affine(float *y, const float *x, const float *mean, const float *scale, const float *beta, size_t rows, size_t C, int relu);
void k_bn_grad_sums(const float *x, const float *dy, const float *y, size_t rows, size_t C,
                    const float *mhi, const float *mlo, const float *invstd, int relu, double *s);
void k_bn_dx(float *dx, const float *dy, const float *x, const float *y, size_t rows, size_t C,
             const float *mean, const float *a, const float *b, const float *c, int relu);
void k_add_relu(float *y, const float *a, const float *b, size_t n);
void k_relu_mask(float *g, const float *dy, const float *y, size_t n);
void k_im2col(float *cols, const float *x, size_t n, size_t C, size_t h, size_t w, size_t k,
              size_t stride, size_t pad, size_t oh, size_t ow);
