// A CPU emulator of the CUDA libraries package gpu opens with dlopen: the
// driver (libcuda), NVRTC, cuBLAS and cuDNN, each symbol gpu/shim.c
// resolves, in one shared object that a test names for all four
// (gpu.Libraries). It exists so that the GPU path's code, the Go side and
// the kernels alike, is tested on machines without a GPU (every CI
// machine, and every session the GPU machine is not lent): the GPU check
// on real hardware (scripts/gpu-check.sh) stays the judge of speed and of
// the real libraries' behaviour.
//
// - Device memory is host memory; a fresh allocation is filled with 0xff
//   bytes (NaN as float32), so a kernel reading what nothing wrote shows.
// - Streams and events are synchronous: work runs when it is queued.
// - NVRTC compiles the kernels with g++ after cuda_emu.h (EMU_PRELUDE,
//   set when this file is built), into a shared object cached by the
//   source's hash; the "cubin" is that object's path.
// - cuBLAS's GemmEx and GemmStridedBatchedEx, and cuDNN's cross-correlation
//   (forward, data and filter gradients), are plain loops accumulating in
//   double. With bf16 or tf32 compute, float inputs are rounded to those
//   formats first, as the tensor cores read them.
// - IPC memory handles and NCCL are not emulated (CUDA_ERROR_NOT_SUPPORTED).
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <string>

#ifndef EMU_PRELUDE
#error "build with -DEMU_PRELUDE=\"/path/to/cuda_emu.h\""
#endif

typedef unsigned long long dptr;

static std::recursive_mutex mu; // one launch or library call at a time
#define LOCK std::lock_guard<std::recursive_mutex> lock_(mu)

extern "C" {

// ---- driver ----

enum {
	OK = 0,
	INVALID_VALUE = 1,
	OUT_OF_MEMORY = 2,
	INVALID_DEVICE = 101,
	INVALID_IMAGE = 200,
	NOT_FOUND = 500,
	LAUNCH_FAILED = 719,
	NOT_SUPPORTED = 801,
};

static const size_t total_mem = (size_t)16 << 30;
static std::map<dptr, size_t> live;
static size_t live_bytes;

int cuInit(unsigned) { return OK; }
int cuDeviceGetCount(int *n) {
	*n = 1;
	return OK;
}
int cuDeviceGet(int *d, int ordinal) {
	if (ordinal != 0) return INVALID_DEVICE;
	*d = 0;
	return OK;
}
int cuDeviceGetName(char *name, int len, int) {
	snprintf(name, len, "CPU emulator (gpu/emu)");
	return OK;
}
int cuDeviceGetAttribute(int *v, int attr, int) {
	switch (attr) {
	case 75: // compute capability major
		*v = 9;
		break;
	case 76:
		*v = 0;
		break;
	case 16: // multiprocessors
		*v = 4;
		break;
	default:
		*v = 0;
	}
	return OK;
}
int cuDeviceTotalMem_v2(size_t *b, int) {
	*b = total_mem;
	return OK;
}
int cuGetErrorString(int code, const char **s) {
	switch (code) {
	case OK: *s = "no error"; break;
	case INVALID_VALUE: *s = "invalid argument"; break;
	case OUT_OF_MEMORY: *s = "out of memory"; break;
	case INVALID_DEVICE: *s = "invalid device ordinal"; break;
	case INVALID_IMAGE: *s = "device kernel image is invalid"; break;
	case NOT_FOUND: *s = "named symbol not found"; break;
	case LAUNCH_FAILED: *s = "unspecified launch failure (emulator: see stderr)"; break;
	case NOT_SUPPORTED: *s = "operation not supported (by the CPU emulator)"; break;
	default: *s = "unknown error"; return INVALID_VALUE;
	}
	return OK;
}
static int ctx_dummy;
int cuDevicePrimaryCtxRetain(void **c, int) {
	*c = &ctx_dummy;
	return OK;
}
int cuCtxSetCurrent(void *) { return OK; }
int cuMemGetInfo_v2(size_t *free, size_t *total) {
	LOCK;
	*total = total_mem;
	*free = total_mem - live_bytes;
	return OK;
}
int cuMemAlloc_v2(dptr *p, size_t bytes) {
	LOCK;
	if (live_bytes + bytes > total_mem) return OUT_OF_MEMORY;
	void *m = aligned_alloc(256, (bytes + 255) / 256 * 256);
	if (!m) return OUT_OF_MEMORY;
	memset(m, 0xff, bytes);
	*p = (dptr)m;
	live[*p] = bytes;
	live_bytes += bytes;
	return OK;
}
int cuMemFree_v2(dptr p) {
	LOCK;
	auto it = live.find(p);
	if (it == live.end()) return INVALID_VALUE;
	live_bytes -= it->second;
	live.erase(it);
	free((void *)p);
	return OK;
}
int cuMemHostAlloc(void **p, size_t bytes, unsigned) {
	*p = malloc(bytes ? bytes : 1);
	return *p ? OK : OUT_OF_MEMORY;
}
int cuMemFreeHost(void *p) {
	free(p);
	return OK;
}
int cuMemsetD32Async(dptr p, unsigned v, size_t n, void *) {
	LOCK;
	uint32_t *q = (uint32_t *)p;
	for (size_t i = 0; i < n; i++) q[i] = v;
	return OK;
}
int cuMemcpyHtoDAsync_v2(dptr dst, const void *src, size_t n, void *) {
	LOCK;
	memmove((void *)dst, src, n);
	return OK;
}
int cuMemcpyDtoHAsync_v2(void *dst, dptr src, size_t n, void *) {
	LOCK;
	memmove(dst, (void *)src, n);
	return OK;
}
int cuMemcpyDtoDAsync_v2(dptr dst, dptr src, size_t n, void *) {
	LOCK;
	memmove((void *)dst, (void *)src, n);
	return OK;
}
static int stream_dummy;
int cuStreamCreate(void **s, unsigned) {
	*s = &stream_dummy;
	return OK;
}
int cuStreamDestroy_v2(void *) { return OK; }
int cuStreamSynchronize(void *) { return OK; }
int cuStreamWaitEvent(void *, void *, unsigned) { return OK; }
int cuEventCreate(void **e, unsigned) {
	*e = calloc(1, sizeof(double));
	return OK;
}
int cuEventDestroy_v2(void *e) {
	free(e);
	return OK;
}
int cuEventRecord(void *e, void *) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	*(double *)e = t.tv_sec * 1e3 + t.tv_nsec / 1e6;
	return OK;
}
int cuEventSynchronize(void *) { return OK; }
int cuEventQuery(void *) { return OK; }
int cuEventElapsedTime(float *ms, void *a, void *b) {
	*ms = (float)(*(double *)b - *(double *)a);
	return OK;
}
int cuEventElapsedTime_v2(float *ms, void *a, void *b) { return cuEventElapsedTime(ms, a, b); }

struct module {
	void *so;
	int (*launch)(void (*)(void **), const unsigned *, const unsigned *, unsigned, void **, char *, int);
};
struct function {
	module *m;
	void (*tramp)(void **);
	std::string name;
};

int cuModuleLoadData(void **mod, const void *image) {
	LOCK;
	void *so = dlopen((const char *)image, RTLD_NOW | RTLD_LOCAL);
	if (!so) {
		fprintf(stderr, "cuda emulator: %s\n", dlerror());
		return INVALID_IMAGE;
	}
	module *m = new module{so, nullptr};
	*(void **)&m->launch = dlsym(so, "emu_launch");
	if (!m->launch) return INVALID_IMAGE;
	*mod = m;
	return OK;
}
int cuModuleGetFunction(void **fn, void *mod, const char *name) {
	module *m = (module *)mod;
	std::string t = std::string("emu_tramp_") + name;
	void *p = dlsym(m->so, t.c_str());
	if (!p) return NOT_FOUND;
	function *f = new function{m, nullptr, name};
	*(void **)&f->tramp = p;
	*fn = f;
	return OK;
}
int cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void *, void **params, void **) {
	LOCK;
	function *f = (function *)fn;
	unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
	char err[512];
	if (f->m->launch(f->tramp, grid, block, shared, params, err, sizeof err) != 0) {
		fprintf(stderr, "cuda emulator: kernel %s: %s\n", f->name.c_str(), err);
		return LAUNCH_FAILED;
	}
	return OK;
}
int cuIpcGetMemHandle(void *, dptr) { return NOT_SUPPORTED; }
struct ipc_handle {
	char b[64];
};
int cuIpcOpenMemHandle_v2(dptr *, ipc_handle, unsigned) { return NOT_SUPPORTED; }
int cuIpcCloseMemHandle(dptr) { return NOT_SUPPORTED; }

// ---- NVRTC ----

struct program {
	std::string src, name, log, so;
};

int nvrtcCreateProgram(void **p, const char *src, const char *name, int, const char *const *, const char *const *) {
	*p = new program{src, name ? name : "kernels.cu", "", ""};
	return 0;
}

static uint64_t fnv(const std::string &s, uint64_t h) {
	for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
	return h;
}

static std::string slurp(const char *path) {
	std::string out;
	FILE *f = fopen(path, "rb");
	if (!f) return out;
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
	fclose(f);
	return out;
}

// kernels lists the __global__ functions' names.
static std::string trampolines(const std::string &src) {
	std::string out;
	size_t at = 0;
	while ((at = src.find("__global__", at)) != std::string::npos) {
		at += 10;
		size_t p = src.find_first_not_of(" \t\n", at);
		if (src.compare(p, 4, "void") != 0) continue;
		p = src.find_first_not_of(" \t\n", p + 4);
		size_t e = src.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_", p);
		std::string name = src.substr(p, e - p);
		out += "extern \"C\" void emu_tramp_" + name + "(void **a) { emu::call(" + name + ", a); }\n";
	}
	return out;
}

// nvrtcCompileProgram builds the kernels into a cached shared object; the
// options (architecture, -default-device) mean nothing here.
int nvrtcCompileProgram(void *pp, int, const char *const *) {
	program *p = (program *)pp;
	std::string src;
	size_t at = 0;
	while (at < p->src.size()) { // drop CUDA's own headers: the prelude stands in for them
		size_t e = p->src.find('\n', at);
		if (e == std::string::npos) e = p->src.size();
		std::string line = p->src.substr(at, e - at);
		if (line.rfind("#include <cuda", 0) != 0) src += line;
		src += "\n";
		at = e + 1;
	}
	std::string prelude = slurp(EMU_PRELUDE);
	const char *flags = "-std=c++17 -O1 -shared -fPIC -w -U_FORTIFY_SOURCE"; // fortify's longjmp check refuses fiber stacks
	std::string full = "#include \"" EMU_PRELUDE "\"\n#line 1 \"" + p->name + "\"\n" + src + "\n" + trampolines(src);
	uint64_t h = fnv(full, fnv(prelude, fnv(flags, 1469598103934665603ull)));
	const char *tmp = getenv("TMPDIR");
	char dir[512], so[600], cc[600], part[700], cmd[2200];
	snprintf(dir, sizeof dir, "%s/train-cuda-emu-%d", tmp && *tmp ? tmp : "/tmp", (int)getuid());
	mkdir(dir, 0700);
	snprintf(so, sizeof so, "%s/%016llx.so", dir, (unsigned long long)h);
	p->so = so;
	if (access(so, R_OK) == 0) return 0;
	snprintf(cc, sizeof cc, "%s/%016llx-%d.cc", dir, (unsigned long long)h, (int)getpid());
	snprintf(part, sizeof part, "%s.%d.so", so, (int)getpid());
	FILE *f = fopen(cc, "w");
	if (!f) {
		p->log = std::string("cannot write ") + cc;
		return 6;
	}
	fwrite(full.data(), 1, full.size(), f);
	fclose(f);
	snprintf(cmd, sizeof cmd, "g++ %s -o '%s' '%s' 2>&1", flags, part, cc);
	FILE *c = popen(cmd, "r");
	char buf[4096];
	size_t n;
	while (c && (n = fread(buf, 1, sizeof buf, c)) > 0) p->log.append(buf, n);
	int rc = c ? pclose(c) : -1;
	unlink(cc);
	if (rc != 0) {
		unlink(part);
		p->log = "g++ " + std::string(flags) + ": " + p->log;
		return 6; // NVRTC_ERROR_COMPILATION
	}
	rename(part, so); // atomic: ranks compiling at once each publish a whole file
	return 0;
}
int nvrtcGetProgramLogSize(void *p, size_t *n) {
	*n = ((program *)p)->log.size() + 1;
	return 0;
}
int nvrtcGetProgramLog(void *p, char *out) {
	strcpy(out, ((program *)p)->log.c_str());
	return 0;
}
int nvrtcGetCUBINSize(void *p, size_t *n) {
	*n = ((program *)p)->so.size() + 1;
	return 0;
}
int nvrtcGetCUBIN(void *p, char *out) {
	strcpy(out, ((program *)p)->so.c_str());
	return 0;
}
int nvrtcDestroyProgram(void **p) {
	delete (program *)*p;
	*p = nullptr;
	return 0;
}
const char *nvrtcGetErrorString(int code) { return code == 6 ? "NVRTC_ERROR_COMPILATION" : "NVRTC error"; }

// ---- cuBLAS ----

enum { R32F = 0, R16F = 2, R16BF = 14 };

static float round_bf16(float f) {
	uint32_t u;
	memcpy(&u, &f, 4);
	if ((u & 0x7fffffff) > 0x7f800000) return f;
	u += 0x7fff + ((u >> 16) & 1);
	u &= 0xffff0000u;
	memcpy(&f, &u, 4);
	return f;
}
static float round_tf32(float f) {
	uint32_t u;
	memcpy(&u, &f, 4);
	if ((u & 0x7fffffff) > 0x7f800000) return f;
	u += 0xfff + ((u >> 13) & 1);
	u &= 0xffffe000u;
	memcpy(&f, &u, 4);
	return f;
}
static float load(const void *p, int type, size_t i) {
	if (type == R16BF) {
		uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
		float f;
		memcpy(&f, &u, 4);
		return f;
	}
	return ((const float *)p)[i];
}
static void store(void *p, int type, size_t i, float v) {
	if (type == R16BF) {
		float r = round_bf16(v);
		uint32_t u;
		memcpy(&u, &r, 4);
		((uint16_t *)p)[i] = (uint16_t)(u >> 16);
		return;
	}
	((float *)p)[i] = v;
}

static int blas_dummy;
int cublasCreate_v2(void **h) {
	*h = &blas_dummy;
	return 0;
}
int cublasDestroy_v2(void *) { return 0; }
int cublasSetStream_v2(void *, void *) { return 0; }
int cublasSetMathMode(void *, int) { return 0; }
const char *cublasGetStatusString(int s) { return s == 0 ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_NOT_SUPPORTED"; }

static int gemm(int ta, int tb, int m, int n, int k, const float *alpha, const void *A, int at, int lda,
                const void *B, int bt, int ldb, const float *beta, void *C, int ct, int ldc, int compute) {
	if ((at != R32F && at != R16BF) || (bt != R32F && bt != R16BF) || (ct != R32F && ct != R16BF)) return 15;
	float (*rnd)(float) = nullptr;
	if (compute == 75) rnd = round_bf16;
	if (compute == 77) rnd = round_tf32;
	for (int j = 0; j < n; j++)
		for (int i = 0; i < m; i++) {
			double s = 0;
			for (int l = 0; l < k; l++) {
				float a = load(A, at, ta ? (size_t)l + (size_t)i * lda : (size_t)i + (size_t)l * lda);
				float b = load(B, bt, tb ? (size_t)j + (size_t)l * ldb : (size_t)l + (size_t)j * ldb);
				if (rnd) a = rnd(a), b = rnd(b);
				s += (double)a * b;
			}
			size_t ci = (size_t)i + (size_t)j * ldc;
			double v = *alpha * s;
			if (*beta != 0) v += (double)*beta * load(C, ct, ci);
			store(C, ct, ci, (float)v);
		}
	return 0;
}

int cublasGemmEx(void *, int ta, int tb, int m, int n, int k, const void *alpha, const void *A, int at, int lda,
                 const void *B, int bt, int ldb, const void *beta, void *C, int ct, int ldc, int compute, int) {
	LOCK;
	return gemm(ta, tb, m, n, k, (const float *)alpha, A, at, lda, B, bt, ldb, (const float *)beta, C, ct, ldc,
	            compute);
}

static size_t esize(int t) { return t == R16BF || t == R16F ? 2 : 4; }

int cublasGemmStridedBatchedEx(void *, int ta, int tb, int m, int n, int k, const void *alpha, const void *A, int at,
                               int lda, long long sa, const void *B, int bt, int ldb, long long sb, const void *beta,
                               void *C, int ct, int ldc, long long sc, int batch, int compute, int) {
	LOCK;
	for (int i = 0; i < batch; i++) {
		int r = gemm(ta, tb, m, n, k, (const float *)alpha, (const char *)A + i * sa * esize(at), at, lda,
		             (const char *)B + i * sb * esize(bt), bt, ldb, (const float *)beta,
		             (char *)C + i * sc * esize(ct), ct, ldc, compute);
		if (r) return r;
	}
	return 0;
}

// ---- cuDNN ----

struct tensor {
	int n, c, h, w;
};
struct convd {
	int ph, pw, sh, sw, dh, dw, mode;
};
struct perf {
	int algo, status;
	float time;
	size_t memory;
	int determinism, mathType;
	int reserved[3];
};

static int dnn_dummy;
int cudnnCreate(void **h) {
	*h = &dnn_dummy;
	return 0;
}
int cudnnSetStream(void *, void *) { return 0; }
const char *cudnnGetErrorString(int s) { return s == 0 ? "CUDNN_STATUS_SUCCESS" : "CUDNN_STATUS_NOT_SUPPORTED"; }
int cudnnCreateTensorDescriptor(void **d) {
	*d = calloc(1, sizeof(tensor));
	return 0;
}
int cudnnSetTensor4dDescriptor(void *d, int format, int type, int n, int c, int h, int w) {
	if (format != 0 || type != 0) return 9; // NCHW float only
	*(tensor *)d = {n, c, h, w};
	return 0;
}
int cudnnDestroyTensorDescriptor(void *d) {
	free(d);
	return 0;
}
int cudnnCreateFilterDescriptor(void **d) { return cudnnCreateTensorDescriptor(d); }
int cudnnSetFilter4dDescriptor(void *d, int type, int format, int k, int c, int h, int w) {
	return cudnnSetTensor4dDescriptor(d, format, type, k, c, h, w);
}
int cudnnDestroyFilterDescriptor(void *d) { return cudnnDestroyTensorDescriptor(d); }
int cudnnCreateConvolutionDescriptor(void **d) {
	*d = calloc(1, sizeof(convd));
	return 0;
}
int cudnnSetConvolution2dDescriptor(void *d, int ph, int pw, int sh, int sw, int dh, int dw, int mode, int) {
	if (mode != 1) return 9; // cross-correlation only
	*(convd *)d = {ph, pw, sh, sw, dh, dw, mode};
	return 0;
}
int cudnnSetConvolutionMathType(void *, int) { return 0; }
int cudnnDestroyConvolutionDescriptor(void *d) {
	free(d);
	return 0;
}
static int one_algo(int *got, perf *p) {
	*got = 1;
	p[0] = perf{0, 0, 0, 0, 1, 0, {0, 0, 0}};
	return 0;
}
int cudnnFindConvolutionForwardAlgorithm(void *, void *, void *, void *, void *, int, int *got, perf *p) {
	return one_algo(got, p);
}
int cudnnFindConvolutionBackwardDataAlgorithm(void *, void *, void *, void *, void *, int, int *got, perf *p) {
	return one_algo(got, p);
}
int cudnnFindConvolutionBackwardFilterAlgorithm(void *, void *, void *, void *, void *, int, int *got, perf *p) {
	return one_algo(got, p);
}
int cudnnGetConvolutionForwardAlgorithm_v7(void *, void *, void *, void *, void *, int, int *got, perf *p) {
	return one_algo(got, p);
}
int cudnnGetConvolutionBackwardDataAlgorithm_v7(void *, void *, void *, void *, void *, int, int *got, perf *p) {
	return one_algo(got, p);
}
int cudnnGetConvolutionBackwardFilterAlgorithm_v7(void *, void *, void *, void *, void *, int, int *got, perf *p) {
	return one_algo(got, p);
}

} // extern "C"

// each visits every (sample, out channel, out pixel, in channel, tap) with
// the input's index, or -1 where it falls in the padding.
template <typename F> static void each(const tensor &x, const tensor &w, const tensor &y, const convd &c, F f) {
	for (int b = 0; b < y.n; b++)
		for (int k = 0; k < y.c; k++)
			for (int oy = 0; oy < y.h; oy++)
				for (int ox = 0; ox < y.w; ox++)
					for (int ch = 0; ch < x.c; ch++)
						for (int r = 0; r < w.h; r++)
							for (int s = 0; s < w.w; s++) {
								int iy = oy * c.sh - c.ph + r * c.dh, ix = ox * c.sw - c.pw + s * c.dw;
								long xi = iy < 0 || iy >= x.h || ix < 0 || ix >= x.w
								              ? -1
								              : (((long)b * x.c + ch) * x.h + iy) * x.w + ix;
								long wi = (((long)k * w.c + ch) * w.h + r) * w.w + s;
								long yi = (((long)b * y.c + k) * y.h + oy) * y.w + ox;
								f(xi, wi, yi);
							}
}

// out = alpha * acc + beta * out, with beta 0 not reading out.
static void blend(float *out, const double *acc, long n, float alpha, float beta) {
	for (long i = 0; i < n; i++) out[i] = (float)(alpha * acc[i] + (beta != 0 ? (double)beta * out[i] : 0.0));
}

extern "C" {

int cudnnConvolutionForward(void *, const void *alpha, void *xd, void *x, void *wd, void *w, void *cd, int, void *,
                            size_t, const void *beta, void *yd, void *y) {
	LOCK;
	const tensor &X = *(tensor *)xd, &W = *(tensor *)wd, &Y = *(tensor *)yd;
	long n = (long)Y.n * Y.c * Y.h * Y.w;
	double *acc = (double *)calloc(n, sizeof(double));
	each(X, W, Y, *(convd *)cd, [&](long xi, long wi, long yi) {
		if (xi >= 0) acc[yi] += (double)((float *)x)[xi] * ((float *)w)[wi];
	});
	blend((float *)y, acc, n, *(const float *)alpha, *(const float *)beta);
	free(acc);
	return 0;
}
int cudnnConvolutionBackwardData(void *, const void *alpha, void *wd, void *w, void *dyd, void *dy, void *cd, int,
                                 void *, size_t, const void *beta, void *dxd, void *dx) {
	LOCK;
	const tensor &X = *(tensor *)dxd, &W = *(tensor *)wd, &Y = *(tensor *)dyd;
	long n = (long)X.n * X.c * X.h * X.w;
	double *acc = (double *)calloc(n, sizeof(double));
	each(X, W, Y, *(convd *)cd, [&](long xi, long wi, long yi) {
		if (xi >= 0) acc[xi] += (double)((float *)dy)[yi] * ((float *)w)[wi];
	});
	blend((float *)dx, acc, n, *(const float *)alpha, *(const float *)beta);
	free(acc);
	return 0;
}
int cudnnConvolutionBackwardFilter(void *, const void *alpha, void *xd, void *x, void *dyd, void *dy, void *cd, int,
                                   void *, size_t, const void *beta, void *dwd, void *dw) {
	LOCK;
	const tensor &X = *(tensor *)xd, &W = *(tensor *)dwd, &Y = *(tensor *)dyd;
	long n = (long)W.n * W.c * W.h * W.w;
	double *acc = (double *)calloc(n, sizeof(double));
	each(X, W, Y, *(convd *)cd, [&](long xi, long wi, long yi) {
		if (xi >= 0) acc[wi] += (double)((float *)dy)[yi] * ((float *)x)[xi];
	});
	blend((float *)dw, acc, n, *(const float *)alpha, *(const float *)beta);
	free(acc);
	return 0;
}

} // extern "C"
