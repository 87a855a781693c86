// The thin C side of package gpu: the CUDA driver, NVRTC, cuBLAS, cuDNN and
// NCCL opened with dlopen, so train builds and runs on machines without
// CUDA. Only the prototypes used are declared, with the libraries' real
// (versioned) symbol names. Every call returns the library's status code
// (0 is success); Go turns it into an error naming the call.
//
// The CUDA context is current per OS thread and Go moves goroutines
// between threads, so every wrapper that touches the device makes the
// one context current first (a thread-local store in the driver).
#ifndef TRAIN_GPU_SHIM_H
#define TRAIN_GPU_SHIM_H

#include <stddef.h>
#include <stdint.h>

typedef uint64_t dptr; // CUdeviceptr
typedef void *cstream; // CUstream (also cudaStream_t)

// Library loading: each writes dlerror's message (or the missing symbol)
// into err on failure.
int cu_load(const char *path, char *err, int errlen);
int nvrtc_load(const char *path, char *err, int errlen);
int cublas_load(const char *path, char *err, int errlen);
int cudnn_load(const char *path, char *err, int errlen);
int nccl_load(const char *path, char *err, int errlen);

// Driver.
int cu_init(void);
int cu_device_count(int *n);
int cu_device_info(int ordinal, char *name, int namelen, int *major, int *minor, size_t *mem);
const char *cu_error_string(int code);
int cu_ctx_open(int ordinal); // retains the primary context and makes it current
int cu_mem_info(size_t *free, size_t *total);
int cu_alloc(dptr *p, size_t bytes);
int cu_free(dptr p);
int cu_host_alloc(void **p, size_t bytes); // pinned, portable, device-mapped
int cu_host_free(void *p);
int cu_memset32(dptr p, uint32_t v, size_t n, cstream s);
int cu_htod(dptr dst, const void *src, size_t bytes, cstream s); // async; sync the stream before reusing src
int cu_dtoh(void *dst, dptr src, size_t bytes, cstream s);
int cu_dtod(dptr dst, dptr src, size_t bytes, cstream s);
int cu_stream_create(cstream *s);
int cu_stream_destroy(cstream s);
int cu_stream_sync(cstream s);
int cu_stream_wait(cstream s, void *ev);
int cu_event_create(void **ev, int timing);
int cu_event_destroy(void *ev);
int cu_event_record(void *ev, cstream s);
int cu_event_sync(void *ev);
int cu_event_query(void *ev); // 0 done, 600 (CUDA_ERROR_NOT_READY) not yet
int cu_event_elapsed(float *ms, void *start, void *end);
int cu_module_load(void **mod, const void *image);
int cu_module_function(void **fn, void *mod, const char *name);
// cu_func_max_shared lets fn be launched with up to bytes of dynamic
// shared memory (above the default 48 KB).
int cu_func_max_shared(void *fn, int bytes);
int cu_launch(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
              unsigned shared, cstream s, void **args);
int cu_ipc_handle(void *handle64, dptr p);
int cu_ipc_open(dptr *p, const void *handle64);
int cu_ipc_close(dptr p);

// NVRTC: compile src for arch (e.g. "sm_90") into a cubin the caller frees;
// log gets the compiler's messages.
int nvrtc_compile(const char *src, const char *name, const char *arch, void **cubin, size_t *cubinlen,
                  char *log, size_t loglen);
const char *nvrtc_error_string(int code);

// cuBLAS: row-major C (m x n) = alpha op(A) op(B) + beta C, float32 storage;
// compute is a cublasComputeType_t (68 fp32, 77 tf32, 75 bf16).
int cublas_create(void **h, cstream s);
int cublas_sgemm_rm(void *h, int transA, int transB, int m, int n, int k, float alpha, dptr a, int lda, dptr b,
                    int ldb, float beta, dptr c, int ldc, int compute);
const char *cublas_error_string(int code);

// cuDNN: NCHW float32 convolution (cross-correlation, square kernel,
// equal stride and padding). A conv holds its descriptors and the
// algorithms chosen for it (tensor-core math where allowed): the fastest
// cuDNN measures, or with deterministic the first deterministic one its
// heuristics rank (the same every run).
int cudnn_create(void **h, cstream s);
const char *cudnn_error_string(int code);
int cudnn_conv_new(void *h, void **conv, int n, int inC, int inH, int inW, int outC, int k, int stride, int pad,
                   int tensorOps, int deterministic, size_t *workspace);
int cudnn_conv_forward(void *h, void *conv, dptr x, dptr w, dptr y, dptr ws, size_t wsbytes);
int cudnn_conv_backward(void *h, void *conv, dptr x, dptr w, dptr dy, dptr dx, dptr dw, dptr ws, size_t wsbytes);
void cudnn_conv_free(void *conv);

// NCCL.
int nccl_unique_id(void *id128);
int nccl_init(void **comm, int nranks, const void *id128, int rank);
int nccl_allreduce_sum_f32(void *comm, dptr buf, size_t n, cstream s);
int nccl_destroy(void *comm);
const char *nccl_error_string(int code);

#endif
