#include "shim.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;

// sym is one function pointer to resolve and its symbol name.
typedef struct {
	void **p;
	const char *name;
} sym;

// open_lib dlopens path and resolves syms[0..n); on failure it writes why
// into err and returns -1. The handle goes to *hout when hout is set.
static int open_lib(const char *path, sym *syms, size_t n, char *err, int errlen, void **hout) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(err, errlen, "%s", dlerror());
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		*syms[i].p = dlsym(h, syms[i].name);
		if (!*syms[i].p) {
			snprintf(err, errlen, "%s lacks %s (library too old?)", path, syms[i].name);
			dlclose(h);
			return -1;
		}
	}
	if (hout) *hout = h;
	return 0;
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

// ---- driver ----

static CUresult (*p_init)(unsigned int);
static CUresult (*p_count)(int *);
static CUresult (*p_get)(CUdevice *, int);
static CUresult (*p_name)(char *, int, CUdevice);
static CUresult (*p_attr)(int *, int, CUdevice);
static CUresult (*p_mem)(size_t *, CUdevice);
static CUresult (*p_errstr)(CUresult, const char **);
static CUresult (*p_retain)(CUcontext *, CUdevice);
static CUresult (*p_setcur)(CUcontext);
static CUresult (*p_meminfo)(size_t *, size_t *);
static CUresult (*p_alloc)(dptr *, size_t);
static CUresult (*p_free)(dptr);
static CUresult (*p_hostalloc)(void **, size_t, unsigned);
static CUresult (*p_hostfree)(void *);
static CUresult (*p_memset32)(dptr, unsigned, size_t, cstream);
static CUresult (*p_htod)(dptr, const void *, size_t, cstream);
static CUresult (*p_dtoh)(void *, dptr, size_t, cstream);
static CUresult (*p_dtod)(dptr, dptr, size_t, cstream);
static CUresult (*p_screate)(cstream *, unsigned);
static CUresult (*p_sdestroy)(cstream);
static CUresult (*p_ssync)(cstream);
static CUresult (*p_swait)(cstream, void *, unsigned);
static CUresult (*p_ecreate)(void **, unsigned);
static CUresult (*p_edestroy)(void *);
static CUresult (*p_erecord)(void *, cstream);
static CUresult (*p_esync)(void *);
static CUresult (*p_equery)(void *);
static CUresult (*p_elapsed)(float *, void *, void *);
static CUresult (*p_modload)(void **, const void *);
static CUresult (*p_modfn)(void **, void *, const char *);
static CUresult (*p_fnattr)(void *, int, int);
static CUresult (*p_launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, cstream,
                            void **, void **);
typedef struct { char b[64]; } ipc_handle;
static CUresult (*p_ipcget)(ipc_handle *, dptr);
static CUresult (*p_ipcopen)(dptr *, ipc_handle, unsigned);
static CUresult (*p_ipcclose)(dptr);

static CUcontext g_ctx;

// cur makes the context current on the calling thread.
static inline CUresult cur(void) { return g_ctx ? p_setcur(g_ctx) : 0; }

// CUdevice_attribute values (cuda.h).
enum { CC_MAJOR = 75, CC_MINOR = 76 };

int cu_load(const char *path, char *err, int errlen) {
	sym s[] = {
	    {(void **)&p_init, "cuInit"},
	    {(void **)&p_count, "cuDeviceGetCount"},
	    {(void **)&p_get, "cuDeviceGet"},
	    {(void **)&p_name, "cuDeviceGetName"},
	    {(void **)&p_attr, "cuDeviceGetAttribute"},
	    {(void **)&p_mem, "cuDeviceTotalMem_v2"},
	    {(void **)&p_errstr, "cuGetErrorString"},
	    {(void **)&p_retain, "cuDevicePrimaryCtxRetain"},
	    {(void **)&p_setcur, "cuCtxSetCurrent"},
	    {(void **)&p_meminfo, "cuMemGetInfo_v2"},
	    {(void **)&p_alloc, "cuMemAlloc_v2"},
	    {(void **)&p_free, "cuMemFree_v2"},
	    {(void **)&p_hostalloc, "cuMemHostAlloc"},
	    {(void **)&p_hostfree, "cuMemFreeHost"},
	    {(void **)&p_memset32, "cuMemsetD32Async"},
	    {(void **)&p_htod, "cuMemcpyHtoDAsync_v2"},
	    {(void **)&p_dtoh, "cuMemcpyDtoHAsync_v2"},
	    {(void **)&p_dtod, "cuMemcpyDtoDAsync_v2"},
	    {(void **)&p_screate, "cuStreamCreate"},
	    {(void **)&p_sdestroy, "cuStreamDestroy_v2"},
	    {(void **)&p_ssync, "cuStreamSynchronize"},
	    {(void **)&p_swait, "cuStreamWaitEvent"},
	    {(void **)&p_ecreate, "cuEventCreate"},
	    {(void **)&p_edestroy, "cuEventDestroy_v2"},
	    {(void **)&p_erecord, "cuEventRecord"},
	    {(void **)&p_esync, "cuEventSynchronize"},
	    {(void **)&p_equery, "cuEventQuery"},
	    {(void **)&p_modload, "cuModuleLoadData"},
	    {(void **)&p_modfn, "cuModuleGetFunction"},
	    {(void **)&p_launch, "cuLaunchKernel"},
	    {(void **)&p_fnattr, "cuFuncSetAttribute"},
	    {(void **)&p_ipcget, "cuIpcGetMemHandle"},
	    {(void **)&p_ipcopen, "cuIpcOpenMemHandle_v2"},
	    {(void **)&p_ipcclose, "cuIpcCloseMemHandle"},
	};
	void *h;
	if (open_lib(path, s, N(s), err, errlen, &h) != 0) return -1;
	// CUDA 12.8 renamed the elapsed-time call; older drivers have only the first.
	p_elapsed = dlsym(h, "cuEventElapsedTime_v2");
	if (!p_elapsed) p_elapsed = dlsym(h, "cuEventElapsedTime");
	if (!p_elapsed) {
		snprintf(err, errlen, "%s lacks cuEventElapsedTime", path);
		return -1;
	}
	return 0;
}

int cu_init(void) { return p_init(0); }
int cu_device_count(int *n) { return p_count(n); }

int cu_device_info(int ordinal, char *name, int namelen, int *major, int *minor, size_t *mem) {
	CUdevice d;
	CUresult r = p_get(&d, ordinal);
	if (r == 0) r = p_name(name, namelen, d);
	if (r == 0) r = p_attr(major, CC_MAJOR, d);
	if (r == 0) r = p_attr(minor, CC_MINOR, d);
	if (r == 0) r = p_mem(mem, d);
	return r;
}

const char *cu_error_string(int code) {
	const char *s = NULL;
	if (!p_errstr || p_errstr(code, &s) != 0 || !s) return "unknown CUDA error";
	return s;
}

int cu_ctx_open(int ordinal) {
	CUdevice d;
	CUresult r = p_get(&d, ordinal);
	if (r == 0) r = p_retain(&g_ctx, d);
	if (r == 0) r = p_setcur(g_ctx);
	return r;
}

#define CUR                                                                                                            \
	do {                                                                                                           \
		CUresult r_ = cur();                                                                                   \
		if (r_) return r_;                                                                                     \
	} while (0)

int cu_mem_info(size_t *free, size_t *total) { CUR; return p_meminfo(free, total); }
int cu_alloc(dptr *p, size_t bytes) { CUR; return p_alloc(p, bytes); }
int cu_free(dptr p) { CUR; return p_free(p); }
int cu_host_alloc(void **p, size_t bytes) { CUR; return p_hostalloc(p, bytes, 1 | 2); } // PORTABLE | DEVICEMAP
int cu_host_free(void *p) { CUR; return p_hostfree(p); }
int cu_memset32(dptr p, uint32_t v, size_t n, cstream s) { CUR; return p_memset32(p, v, n, s); }
int cu_htod(dptr dst, const void *src, size_t bytes, cstream s) { CUR; return p_htod(dst, src, bytes, s); }
int cu_dtoh(void *dst, dptr src, size_t bytes, cstream s) { CUR; return p_dtoh(dst, src, bytes, s); }
int cu_dtod(dptr dst, dptr src, size_t bytes, cstream s) { CUR; return p_dtod(dst, src, bytes, s); }
int cu_stream_create(cstream *s) { CUR; return p_screate(s, 0); }
int cu_stream_destroy(cstream s) { CUR; return p_sdestroy(s); }
int cu_stream_sync(cstream s) { CUR; return p_ssync(s); }
int cu_stream_wait(cstream s, void *ev) { CUR; return p_swait(s, ev, 0); }
int cu_event_create(void **ev, int timing) { CUR; return p_ecreate(ev, timing ? 0 : 2); }
int cu_event_destroy(void *ev) { CUR; return p_edestroy(ev); }
int cu_event_record(void *ev, cstream s) { CUR; return p_erecord(ev, s); }
int cu_event_sync(void *ev) { CUR; return p_esync(ev); }
int cu_event_query(void *ev) { CUR; return p_equery(ev); }
int cu_event_elapsed(float *ms, void *start, void *end) { CUR; return p_elapsed(ms, start, end); }
int cu_module_load(void **mod, const void *image) { CUR; return p_modload(mod, image); }
int cu_module_function(void **fn, void *mod, const char *name) { CUR; return p_modfn(fn, mod, name); }

int cu_func_max_shared(void *fn, int bytes) {
	CUR;
	return p_fnattr(fn, 8 /* CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES */, bytes);
}

int cu_launch(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
              unsigned shared, cstream s, void **args) {
	CUR;
	return p_launch(fn, gx, gy, gz, bx, by, bz, shared, s, args, NULL);
}

int cu_ipc_handle(void *handle64, dptr p) {
	CUR;
	return p_ipcget((ipc_handle *)handle64, p);
}

int cu_ipc_open(dptr *p, const void *handle64) {
	CUR;
	ipc_handle h;
	memcpy(&h, handle64, sizeof h);
	return p_ipcopen(p, h, 1); // CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
}

int cu_ipc_close(dptr p) { CUR; return p_ipcclose(p); }

// ---- NVRTC ----

typedef void *nvrtcProgram;
static int (*p_rtc_create)(nvrtcProgram *, const char *, const char *, int, const char *const *,
                           const char *const *);
static int (*p_rtc_compile)(nvrtcProgram, int, const char *const *);
static int (*p_rtc_logsize)(nvrtcProgram, size_t *);
static int (*p_rtc_log)(nvrtcProgram, char *);
static int (*p_rtc_cubinsize)(nvrtcProgram, size_t *);
static int (*p_rtc_cubin)(nvrtcProgram, char *);
static int (*p_rtc_destroy)(nvrtcProgram *);
static const char *(*p_rtc_err)(int);

int nvrtc_load(const char *path, char *err, int errlen) {
	sym s[] = {
	    {(void **)&p_rtc_create, "nvrtcCreateProgram"},
	    {(void **)&p_rtc_compile, "nvrtcCompileProgram"},
	    {(void **)&p_rtc_logsize, "nvrtcGetProgramLogSize"},
	    {(void **)&p_rtc_log, "nvrtcGetProgramLog"},
	    {(void **)&p_rtc_cubinsize, "nvrtcGetCUBINSize"},
	    {(void **)&p_rtc_cubin, "nvrtcGetCUBIN"},
	    {(void **)&p_rtc_destroy, "nvrtcDestroyProgram"},
	    {(void **)&p_rtc_err, "nvrtcGetErrorString"},
	};
	return open_lib(path, s, N(s), err, errlen, NULL);
}

const char *nvrtc_error_string(int code) { return p_rtc_err ? p_rtc_err(code) : "NVRTC not loaded"; }

int nvrtc_compile(const char *src, const char *name, const char *arch, void **cubin, size_t *cubinlen, char *log,
                  size_t loglen) {
	nvrtcProgram prog;
	int r = p_rtc_create(&prog, src, name, 0, NULL, NULL);
	if (r) return r;
	char archopt[64];
	snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", arch);
	const char *opts[] = {archopt, "-std=c++17", "-default-device"};
	int cr = p_rtc_compile(prog, 3, opts);
	size_t n = 0;
	log[0] = 0;
	if (p_rtc_logsize(prog, &n) == 0 && n > 1) {
		char *buf = malloc(n);
		if (buf && p_rtc_log(prog, buf) == 0) snprintf(log, loglen, "%s", buf);
		free(buf);
	}
	if (cr == 0) {
		cr = p_rtc_cubinsize(prog, cubinlen);
		if (cr == 0) {
			*cubin = malloc(*cubinlen);
			cr = p_rtc_cubin(prog, *cubin);
		}
	}
	p_rtc_destroy(&prog);
	return cr;
}

// ---- cuBLAS ----

static int (*p_blas_create)(void **);
static int (*p_blas_stream)(void *, cstream);
static int (*p_blas_gemmex)(void *, int, int, int, int, int, const void *, const void *, int, int, const void *,
                            int, int, const void *, void *, int, int, int, int);
static const char *(*p_blas_err)(int);

int cublas_load(const char *path, char *err, int errlen) {
	sym s[] = {
	    {(void **)&p_blas_create, "cublasCreate_v2"},
	    {(void **)&p_blas_stream, "cublasSetStream_v2"},
	    {(void **)&p_blas_gemmex, "cublasGemmEx"},
	    {(void **)&p_blas_err, "cublasGetStatusString"},
	};
	return open_lib(path, s, N(s), err, errlen, NULL);
}

const char *cublas_error_string(int code) { return p_blas_err ? p_blas_err(code) : "cuBLAS not loaded"; }

int cublas_create(void **h, cstream s) {
	CUR;
	int r = p_blas_create(h);
	if (r == 0) r = p_blas_stream(*h, s);
	return r;
}

// Row-major C = A B is column-major C^T = B^T A^T: swap the operands.
int cublas_sgemm_rm(void *h, int transA, int transB, int m, int n, int k, float alpha, dptr a, int lda, dptr b,
                    int ldb, float beta, dptr c, int ldc, int compute) {
	CUR;
	enum { R32F = 0, GEMM_DEFAULT = -1 };
	return p_blas_gemmex(h, transB, transA, n, m, k, &alpha, (const void *)b, R32F, ldb, (const void *)a, R32F,
	                     lda, &beta, (void *)c, R32F, ldc, compute, GEMM_DEFAULT);
}

// ---- cuDNN ----

typedef struct {
	int algo, status;
	float time;
	size_t memory;
	int determinism, mathType;
	int reserved[3];
} perf; // cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t

static int (*p_dnn_create)(void **);
static int (*p_dnn_stream)(void *, cstream);
static const char *(*p_dnn_err)(int);
static int (*p_tdesc_create)(void **);
static int (*p_tdesc_set)(void *, int, int, int, int, int, int);
static int (*p_tdesc_destroy)(void *);
static int (*p_fdesc_create)(void **);
static int (*p_fdesc_set)(void *, int, int, int, int, int, int);
static int (*p_fdesc_destroy)(void *);
static int (*p_cdesc_create)(void **);
static int (*p_cdesc_set)(void *, int, int, int, int, int, int, int, int);
static int (*p_cdesc_math)(void *, int);
static int (*p_cdesc_destroy)(void *);
static int (*p_find_fwd)(void *, void *, void *, void *, void *, int, int *, perf *);
static int (*p_find_bwd_data)(void *, void *, void *, void *, void *, int, int *, perf *);
static int (*p_find_bwd_filter)(void *, void *, void *, void *, void *, int, int *, perf *);
static int (*p_heur_fwd)(void *, void *, void *, void *, void *, int, int *, perf *);
static int (*p_heur_bwd_data)(void *, void *, void *, void *, void *, int, int *, perf *);
static int (*p_heur_bwd_filter)(void *, void *, void *, void *, void *, int, int *, perf *);
static int (*p_fwd)(void *, const void *, void *, const void *, void *, const void *, void *, int, void *, size_t,
                    const void *, void *, void *);
static int (*p_bwd_data)(void *, const void *, void *, const void *, void *, const void *, void *, int, void *,
                         size_t, const void *, void *, void *);
static int (*p_bwd_filter)(void *, const void *, void *, const void *, void *, const void *, void *, int, void *,
                           size_t, const void *, void *, void *);

int cudnn_load(const char *path, char *err, int errlen) {
	sym s[] = {
	    {(void **)&p_dnn_create, "cudnnCreate"},
	    {(void **)&p_dnn_stream, "cudnnSetStream"},
	    {(void **)&p_dnn_err, "cudnnGetErrorString"},
	    {(void **)&p_tdesc_create, "cudnnCreateTensorDescriptor"},
	    {(void **)&p_tdesc_set, "cudnnSetTensor4dDescriptor"},
	    {(void **)&p_tdesc_destroy, "cudnnDestroyTensorDescriptor"},
	    {(void **)&p_fdesc_create, "cudnnCreateFilterDescriptor"},
	    {(void **)&p_fdesc_set, "cudnnSetFilter4dDescriptor"},
	    {(void **)&p_fdesc_destroy, "cudnnDestroyFilterDescriptor"},
	    {(void **)&p_cdesc_create, "cudnnCreateConvolutionDescriptor"},
	    {(void **)&p_cdesc_set, "cudnnSetConvolution2dDescriptor"},
	    {(void **)&p_cdesc_math, "cudnnSetConvolutionMathType"},
	    {(void **)&p_cdesc_destroy, "cudnnDestroyConvolutionDescriptor"},
	    {(void **)&p_find_fwd, "cudnnFindConvolutionForwardAlgorithm"},
	    {(void **)&p_find_bwd_data, "cudnnFindConvolutionBackwardDataAlgorithm"},
	    {(void **)&p_find_bwd_filter, "cudnnFindConvolutionBackwardFilterAlgorithm"},
	    {(void **)&p_heur_fwd, "cudnnGetConvolutionForwardAlgorithm_v7"},
	    {(void **)&p_heur_bwd_data, "cudnnGetConvolutionBackwardDataAlgorithm_v7"},
	    {(void **)&p_heur_bwd_filter, "cudnnGetConvolutionBackwardFilterAlgorithm_v7"},
	    {(void **)&p_fwd, "cudnnConvolutionForward"},
	    {(void **)&p_bwd_data, "cudnnConvolutionBackwardData"},
	    {(void **)&p_bwd_filter, "cudnnConvolutionBackwardFilter"},
	};
	return open_lib(path, s, N(s), err, errlen, NULL);
}

const char *cudnn_error_string(int code) { return p_dnn_err ? p_dnn_err(code) : "cuDNN not loaded"; }

int cudnn_create(void **h, cstream s) {
	CUR;
	int r = p_dnn_create(h);
	if (r == 0) r = p_dnn_stream(*h, s);
	return r;
}

// A convolution: descriptors and the algorithm picked for each direction.
typedef struct {
	void *x, *y, *w, *c;
	int fwd, bwdData, bwdFilter;
} conv;

enum { NCHW = 0, FLOAT = 0, CROSS_CORRELATION = 1, DEFAULT_MATH = 0, FMA_MATH = 3 };

void cudnn_conv_free(void *cv) {
	conv *c = cv;
	if (!c) return;
	if (c->x) p_tdesc_destroy(c->x);
	if (c->y) p_tdesc_destroy(c->y);
	if (c->w) p_fdesc_destroy(c->w);
	if (c->c) p_cdesc_destroy(c->c);
	free(c);
}

// best is the first algorithm of the list (fastest first) that succeeded
// within the workspace limit, and is deterministic if asked.
static int best(perf *p, int n, size_t limit, int det, size_t *need) {
	for (int i = 0; i < n; i++) {
		if (p[i].status == 0 && p[i].memory <= limit && (!det || p[i].determinism == 1)) {
			if (p[i].memory > *need) *need = p[i].memory;
			return p[i].algo;
		}
	}
	return -1;
}

int cudnn_conv_new(void *h, void **out, int n, int inC, int inH, int inW, int outC, int k, int stride, int pad,
                   int tensorOps, int det, size_t *workspace) {
	CUR;
	conv *c = calloc(1, sizeof *c);
	int outH = (inH + 2 * pad - k) / stride + 1, outW = (inW + 2 * pad - k) / stride + 1;
	int r = p_tdesc_create(&c->x);
	if (!r) r = p_tdesc_set(c->x, NCHW, FLOAT, n, inC, inH, inW);
	if (!r) r = p_tdesc_create(&c->y);
	if (!r) r = p_tdesc_set(c->y, NCHW, FLOAT, n, outC, outH, outW);
	if (!r) r = p_fdesc_create(&c->w);
	if (!r) r = p_fdesc_set(c->w, FLOAT, NCHW, outC, inC, k, k);
	if (!r) r = p_cdesc_create(&c->c);
	if (!r) r = p_cdesc_set(c->c, pad, pad, stride, stride, 1, 1, CROSS_CORRELATION, FLOAT);
	if (!r) r = p_cdesc_math(c->c, tensorOps ? DEFAULT_MATH : FMA_MATH);
	perf p[16];
	int got = 0;
	const size_t limit = (size_t)512 << 20;
	*workspace = 0;
	if (!r) r = (det ? p_heur_fwd : p_find_fwd)(h, c->x, c->w, c->c, c->y, 16, &got, p);
	if (!r && (c->fwd = best(p, got, limit, det, workspace)) < 0) r = 9; // CUDNN_STATUS_NOT_SUPPORTED
	if (!r) r = (det ? p_heur_bwd_data : p_find_bwd_data)(h, c->w, c->y, c->c, c->x, 16, &got, p);
	if (!r && (c->bwdData = best(p, got, limit, det, workspace)) < 0) r = 9;
	if (!r) r = (det ? p_heur_bwd_filter : p_find_bwd_filter)(h, c->x, c->y, c->c, c->w, 16, &got, p);
	if (!r && (c->bwdFilter = best(p, got, limit, det, workspace)) < 0) r = 9;
	if (r) {
		cudnn_conv_free(c);
		return r;
	}
	*out = c;
	return 0;
}

int cudnn_conv_forward(void *h, void *cv, dptr x, dptr w, dptr y, dptr ws, size_t wsbytes) {
	CUR;
	conv *c = cv;
	float one = 1, zero = 0;
	return p_fwd(h, &one, c->x, (void *)x, c->w, (void *)w, c->c, c->fwd, (void *)ws, wsbytes, &zero, c->y,
	             (void *)y);
}

// Backward adds the weight gradient into dw (beta 1, as every layer adds
// into the flat gradient buffer) and writes dx unless it is 0.
int cudnn_conv_backward(void *h, void *cv, dptr x, dptr w, dptr dy, dptr dx, dptr dw, dptr ws, size_t wsbytes) {
	CUR;
	conv *c = cv;
	float one = 1, zero = 0;
	int r = p_bwd_filter(h, &one, c->x, (void *)x, c->y, (void *)dy, c->c, c->bwdFilter, (void *)ws, wsbytes, &one,
	                     c->w, (void *)dw);
	if (r || !dx) return r;
	return p_bwd_data(h, &one, c->w, (void *)w, c->y, (void *)dy, c->c, c->bwdData, (void *)ws, wsbytes, &zero,
	                  c->x, (void *)dx);
}

// ---- NCCL ----

typedef struct { char b[128]; } nccl_id;
static int (*p_nccl_id)(nccl_id *);
static int (*p_nccl_init)(void **, int, nccl_id, int);
static int (*p_nccl_allreduce)(const void *, void *, size_t, int, int, void *, cstream);
static int (*p_nccl_destroy)(void *);
static const char *(*p_nccl_err)(int);

int nccl_load(const char *path, char *err, int errlen) {
	sym s[] = {
	    {(void **)&p_nccl_id, "ncclGetUniqueId"},
	    {(void **)&p_nccl_init, "ncclCommInitRank"},
	    {(void **)&p_nccl_allreduce, "ncclAllReduce"},
	    {(void **)&p_nccl_destroy, "ncclCommDestroy"},
	    {(void **)&p_nccl_err, "ncclGetErrorString"},
	};
	return open_lib(path, s, N(s), err, errlen, NULL);
}

const char *nccl_error_string(int code) { return p_nccl_err ? p_nccl_err(code) : "NCCL not loaded"; }
int nccl_unique_id(void *id128) { return p_nccl_id((nccl_id *)id128); }

int nccl_init(void **comm, int nranks, const void *id128, int rank) {
	CUR;
	nccl_id id;
	memcpy(&id, id128, sizeof id);
	return p_nccl_init(comm, nranks, id, rank);
}

int nccl_allreduce_sum_f32(void *comm, dptr buf, size_t n, cstream s) {
	CUR;
	enum { ncclFloat32 = 7, ncclSum = 0 };
	return p_nccl_allreduce((void *)buf, (void *)buf, n, ncclFloat32, ncclSum, comm, s);
}

int nccl_destroy(void *comm) { CUR; return p_nccl_destroy(comm); }
