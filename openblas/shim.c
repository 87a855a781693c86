#include "shim.h"

#include <dlfcn.h>
#include <stdio.h>

typedef void (*sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta,
                         float *c, int ldc);
static void *handle;
static sgemm_fn p_sgemm;
static void (*p_set_threads)(int);
static int (*p_get_threads)(void);
static char *(*p_corename)(void);
static char *(*p_config)(void);

// CBLAS enum values (cblas.h): row-major, no transpose, transpose.
enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };

int ob_load(const char *path, char *err, int errlen) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(err, errlen, "%s", dlerror());
		return -1;
	}
	p_sgemm = (sgemm_fn)dlsym(h, "cblas_sgemm");
	p_set_threads = (void (*)(int))dlsym(h, "openblas_set_num_threads");
	p_get_threads = (int (*)(void))dlsym(h, "openblas_get_num_threads");
	p_corename = (char *(*)(void))dlsym(h, "openblas_get_corename");
	p_config = (char *(*)(void))dlsym(h, "openblas_get_config");
	if (!p_sgemm || !p_set_threads || !p_get_threads) {
		snprintf(err, errlen, "%s lacks cblas_sgemm or openblas_set_num_threads", path);
		dlclose(h);
		return -1;
	}
	handle = h;
	return 0;
}

// ob_unload closes the library, so that the next ob_load runs its start-up
// again (OpenBLAS picks its kernels there, once). Nothing may call the old
// pointers afterwards.
void ob_unload(void) {
	if (handle)
		dlclose(handle);
	handle = NULL;
	p_sgemm = NULL;
	p_set_threads = NULL;
	p_get_threads = NULL;
	p_corename = NULL;
	p_config = NULL;
}

void ob_sgemm(int transA, int transB, int m, int n, int k, float alpha, const float *a, int lda,
              const float *b, int ldb, float beta, float *c, int ldc) {
	p_sgemm(ROW_MAJOR, transA ? TRANS : NO_TRANS, transB ? TRANS : NO_TRANS, m, n, k, alpha,
	        a, lda, b, ldb, beta, c, ldc);
}

void *ob_sgemm_ptr(void) { return (void *)p_sgemm; }
void ob_set_threads(int n) { p_set_threads(n); }
int ob_get_threads(void) { return p_get_threads(); }
const char *ob_corename(void) { return p_corename ? p_corename() : "unknown"; }
const char *ob_config(void) { return p_config ? p_config() : "unknown"; }
