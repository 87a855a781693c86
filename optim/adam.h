#include <stddef.h>
float k_adam(float *p, const float *grad, float *m, float *v, size_t n, float b1, float b2, float c1, float c2,
             float step, float rbc2, float eps, float shrink, float l2);
double k_sumsq(const float *x, size_t n);
float k_sgd(float *p, const float *grad, float *buf, size_t n, float lr, float wd, float mu, int mode);
