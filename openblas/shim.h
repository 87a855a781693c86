// dlopen shim for OpenBLAS: the binary does not link it, so it starts on
// machines without it and falls back to gonum's pure-Go BLAS.
#ifndef TRAIN_OPENBLAS_SHIM_H
#define TRAIN_OPENBLAS_SHIM_H
int ob_load(const char *path, char *err, int errlen);
void ob_unload(void);
void ob_sgemm(int transA, int transB, int m, int n, int k, float alpha, const float *a, int lda,
              const float *b, int ldb, float beta, float *c, int ldc);
void *ob_sgemm_ptr(void);
void ob_set_threads(int n);
int ob_get_threads(void);
const char *ob_corename(void);
const char *ob_config(void);
#endif
