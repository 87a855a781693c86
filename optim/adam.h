#include <stddef.h>
float k_adam(float *p, const float *grad, float *m, float *v, size_t n, float b1, float b2, float c1, float c2,
             float step, float rbc2, float eps, float shrink, float l2);
double k_sumsq(const float *x, size_t n);
float k_sgd(float *p, const float *grad, float *buf, size_t n, float lr, float wd, float mu, int mode);
// A run of parameters that all do (decay 1), or all do not, take weight
// decay, ending (exclusive) at end.
struct k_seg {
	size_t end;
	int decay;
};
float k_adam_update(void *pool, float *p, const float *g, float *m, float *v, size_t n, const struct k_seg *segs,
                    size_t nsegs, float b1, float b2, float c1, float c2, float step, float rbc2, float eps,
                    float shrink, float l2);
float k_sgd_update(void *pool, float *p, const float *g, float *buf, size_t n, const struct k_seg *segs, size_t nsegs,
                   float lr, float wd, float mu, int mode);
double k_sumsq_pool(void *pool, const float *x, size_t n);
void k_sumsq_group(size_t g);
void k_scale_pool(void *pool, float *x, size_t n, float c);
