package gpu

// #cgo LDFLAGS: -ldl
// #include <stdlib.h>
// #include "shim.h"
import "C"

import (
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// The libraries train opens when --device cuda asks for them; Libraries
// names others (tests, unusual installs).
const (
	Driver    = "libcuda.so.1"
	LibNVRTC  = "libnvrtc.so.13"
	LibCUBLAS = "libcublas.so.13"
	LibCUDNN  = "libcudnn.so.9"
	LibNCCL   = "libnccl.so.2"
)

var (
	loadOnce sync.Once
	loadErr  error
)

// Libraries name other builds of the CUDA libraries than the sonames
// above (a path or a soname each; "" keeps the default). They are opened
// once per process, so the first Open's choice holds.
type Libraries struct {
	CUDA, NVRTC, CUBLAS, CUDNN, NCCL string
}

// Options are how a Ctx computes, beside its precision.
type Options struct {
	// Deterministic picks cuDNN's algorithms by its heuristics, first
	// deterministic one, instead of measuring the fastest: runs then
	// repeat bit for bit (the fastest ones may add with atomics).
	Deterministic bool
	// Profile times each layer kind, synchronising around every layer.
	Profile   bool
	Libraries Libraries
}

// lib opens one library with loader: override if it is set, else each
// name in turn; the error names every name tried.
func lib(override string, loader func(*C.char, *C.char, C.int) C.int, names ...string) error {
	if override != "" {
		names = []string{override}
	}
	var msgs []string
	for _, n := range names {
		cn := C.CString(n)
		var buf [512]C.char
		r := loader(cn, &buf[0], C.int(len(buf)))
		C.free(unsafe.Pointer(cn))
		if r == 0 {
			return nil
		}
		msgs = append(msgs, C.GoString(&buf[0]))
	}
	return errors.New(strings.Join(msgs, "; "))
}

// load opens the driver (driver, or the default soname if "") once per
// process and initialises it. Nothing happens until a caller asks for a
// GPU: no init() side effects.
func load(driver string) error {
	loadOnce.Do(func() {
		if err := lib(driver, func(p, e *C.char, n C.int) C.int { return C.cu_load(p, e, n) }, Driver); err != nil {
			loadErr = fmt.Errorf("no CUDA driver: %v (an NVIDIA GPU and its driver are needed for --device cuda)", err)
			return
		}
		loadErr = check("cuInit", C.cu_init())
	})
	return loadErr
}

// check turns a CUresult into an error naming the call.
func check(call string, r C.int) error {
	if r == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s (CUresult %d)", call, C.GoString(C.cu_error_string(r)), int(r))
}

// Count is the number of CUDA devices.
func Count() (int, error) {
	if err := load(""); err != nil {
		return 0, err
	}
	var n C.int
	if err := check("cuDeviceGetCount", C.cu_device_count(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// Device describes one GPU.
type Device struct {
	Ordinal      int
	Name         string
	Major, Minor int // compute capability
	Memory       uint64
}

func (d Device) String() string {
	return fmt.Sprintf("GPU %d: %s, compute capability %d.%d, %.1f GiB", d.Ordinal, d.Name, d.Major, d.Minor, float64(d.Memory)/(1<<30))
}

// ForLocalRank picks the device of a node-local rank: local rank modulo the
// device count, so several ranks may share one GPU.
func ForLocalRank(localRank int) (Device, error) {
	n, err := Count()
	if err != nil {
		return Device{}, err
	}
	if n == 0 {
		return Device{}, fmt.Errorf("the CUDA driver sees no GPU")
	}
	return Info(localRank % n)
}

// Info describes device ordinal.
func Info(ordinal int) (Device, error) {
	if err := load(""); err != nil {
		return Device{}, err
	}
	var name [256]C.char
	var major, minor C.int
	var mem C.size_t
	if err := check("cuDeviceGet", C.cu_device_info(C.int(ordinal), &name[0], C.int(len(name)), &major, &minor, &mem)); err != nil {
		return Device{}, fmt.Errorf("device %d: %v", ordinal, err)
	}
	return Device{Ordinal: ordinal, Name: C.GoString(&name[0]), Major: int(major), Minor: int(minor), Memory: uint64(mem)}, nil
}

// The kernels: kernels.cu, then gpt.cu (which uses its macros) and
// flash.cu, compiled as one program.
var (
	//go:embed kernels/kernels.cu
	kernelsCU string
	//go:embed kernels/gpt.cu
	gptCU string
	//go:embed kernels/flash.cu
	flashCU      string
	kernelSource = kernelsCU + "\n#line 1 \"gpt.cu\"\n" + gptCU + "\n#line 1 \"flash.cu\"\n" + flashCU
)

// flashTile is flash.cu's FT (rows of 64, padded to 65 floats in shared
// memory: FLD) and flashShared each of its kernels' dynamic shared memory,
// in tiles (Q, K, V, P; Q, dO, K, V, dS; K, V, Q, dO, P, dS): more than the
// default 48 KB.
const (
	flashTile      = 64
	flashTileBytes = flashTile * (flashTile + 1) * 4
)

var flashShared = map[string]int{"flash_fwd": 4 * flashTileBytes, "flash_bwd_q": 5 * flashTileBytes, "flash_bwd_kv": 6 * flashTileBytes}

// Precision selects the arithmetic of matrix products and convolutions:
// fp32 (exact float32, the default and what the tests compare), tf32
// (tensor cores with 10-bit mantissas, PyTorch's default for
// convolutions) or bf16 (tensor cores on bfloat16-rounded inputs; storage
// and master weights stay float32).
type Precision string

// Ctx is the process's GPU: the device, its primary context, one stream
// on which all work is queued in order, the cuBLAS and cuDNN handles and
// the compiled kernels. A process opens one.
type Ctx struct {
	Dev       Device
	Precision Precision
	stream    C.cstream
	blas, dnn unsafe.Pointer
	fns       map[string]unsafe.Pointer
	ws        *Buf // cuDNN workspace, grown as convolutions need
	ones      *Buf // a row of ones for sumRows, grown as needed
	mu        sync.Mutex
	err       error // the first failure of a queued call; see Err
	live      int64 // bytes of device memory this process holds through Alloc
	peak      int64
	libs      Libraries
	// Deterministic (Options.Deterministic) picks cuDNN's algorithms by
	// its heuristics among the deterministic ones, so two runs compute the
	// same bits; by default the fastest algorithms cuDNN measures are used,
	// which may differ from run to run (and some add with atomics).
	Deterministic bool
	// Profile, when non-nil, collects the time of each layer kind's
	// forward and backward, every timed call fenced by Syncs (slower: for
	// finding where a step's time goes; Options.Profile, --gpu-profile).
	Profile map[string]time.Duration
}

// timed runs f, adding its time to Profile[name] when profiling.
func (c *Ctx) timed(name string, f func()) {
	if c.Profile == nil {
		f()
		return
	}
	c.Sync()
	t := time.Now()
	f()
	c.Sync()
	c.Profile[name] += time.Since(t)
}

// PeakBytes is the most device memory held through Alloc at once (the
// libraries' own allocations, cuDNN's and cuBLAS's, are not counted).
func (c *Ctx) PeakBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peak
}

func (c *Ctx) account(bytes int64) {
	c.mu.Lock()
	c.live += bytes
	c.peak = max(c.peak, c.live)
	c.mu.Unlock()
}

var (
	openMu  sync.Mutex
	openCtx *Ctx
)

// Open makes the GPU of this node-local rank ready: the primary context,
// a stream, cuBLAS, cuDNN and the kernels compiled by NVRTC for its
// compute capability. Later calls return the same Ctx.
func Open(localRank int, prec Precision, opt Options) (*Ctx, error) {
	openMu.Lock()
	defer openMu.Unlock()
	if openCtx != nil {
		return openCtx, nil
	}
	switch prec {
	case "", "fp32":
		prec = "fp32"
	case "tf32", "bf16":
	default:
		return nil, fmt.Errorf("--precision %q: choose fp32, tf32 or bf16", prec)
	}
	if err := load(opt.Libraries.CUDA); err != nil {
		return nil, err
	}
	dev, err := ForLocalRank(localRank)
	if err != nil {
		return nil, err
	}
	if err := check("cuDevicePrimaryCtxRetain", C.cu_ctx_open(C.int(dev.Ordinal))); err != nil {
		return nil, err
	}
	c := &Ctx{Dev: dev, Precision: prec, fns: map[string]unsafe.Pointer{}, Deterministic: opt.Deterministic, libs: opt.Libraries}
	if opt.Profile {
		c.Profile = map[string]time.Duration{}
	}
	if err := check("cuStreamCreate", C.cu_stream_create(&c.stream)); err != nil {
		return nil, err
	}
	if err := lib(opt.Libraries.NVRTC, func(p, e *C.char, n C.int) C.int { return C.nvrtc_load(p, e, n) }, LibNVRTC, "libnvrtc.so.12", "libnvrtc.so"); err != nil {
		return nil, fmt.Errorf("NVRTC (CUDA's run-time compiler) is needed for --device cuda: %v", err)
	}
	if err := lib(opt.Libraries.CUBLAS, func(p, e *C.char, n C.int) C.int { return C.cublas_load(p, e, n) }, LibCUBLAS, "libcublas.so.12", "libcublas.so"); err != nil {
		return nil, fmt.Errorf("cuBLAS is needed for --device cuda: %v", err)
	}
	if err := lib(opt.Libraries.CUDNN, func(p, e *C.char, n C.int) C.int { return C.cudnn_load(p, e, n) }, LibCUDNN, "libcudnn.so.8", "libcudnn.so"); err != nil {
		return nil, fmt.Errorf("cuDNN is needed for --device cuda: %v", err)
	}
	if r := C.cublas_create(&c.blas, c.stream); r != 0 {
		return nil, fmt.Errorf("cublasCreate: %s", C.GoString(C.cublas_error_string(r)))
	}
	if r := C.cudnn_create(&c.dnn, c.stream); r != 0 {
		return nil, fmt.Errorf("cudnnCreate: %s", C.GoString(C.cudnn_error_string(r)))
	}
	if err := c.compile(); err != nil {
		return nil, err
	}
	openCtx = c
	return c, nil
}

// compile builds the kernels for this device with NVRTC and loads them.
func (c *Ctx) compile() error {
	src := C.CString(kernelSource)
	defer C.free(unsafe.Pointer(src))
	name := C.CString("kernels.cu")
	defer C.free(unsafe.Pointer(name))
	arch := C.CString(fmt.Sprintf("sm_%d%d", c.Dev.Major, c.Dev.Minor))
	defer C.free(unsafe.Pointer(arch))
	var cubin unsafe.Pointer
	var n C.size_t
	var log [8192]C.char
	if r := C.nvrtc_compile(src, name, arch, &cubin, &n, &log[0], C.size_t(len(log))); r != 0 {
		return fmt.Errorf("NVRTC could not compile gpu/kernels/kernels.cu for sm_%d%d: %s\n%s", c.Dev.Major, c.Dev.Minor, C.GoString(C.nvrtc_error_string(r)), C.GoString(&log[0]))
	}
	defer C.free(cubin)
	var mod unsafe.Pointer
	if err := check("cuModuleLoadData", C.cu_module_load(&mod, cubin)); err != nil {
		return err
	}
	for _, k := range kernelNames {
		ck := C.CString(k)
		var fn unsafe.Pointer
		err := check("cuModuleGetFunction("+k+")", C.cu_module_function(&fn, mod, ck))
		C.free(unsafe.Pointer(ck))
		if err != nil {
			return err
		}
		c.fns[k] = fn
		if bytes := flashShared[k]; bytes > 0 {
			if err := check("cuFuncSetAttribute("+k+")", C.cu_func_max_shared(fn, C.int(bytes))); err != nil {
				return err
			}
		}
	}
	return nil
}

// kernelNames are the kernels of kernels.cu, gpt.cu and flash.cu the Go
// side launches.
var kernelNames = []string{
	"fill", "add_to", "scale", "bias_rows", "bias_chan", "bias_chan_grad",
	"relu_fwd", "relu_bwd", "add_relu", "maxpool_fwd", "maxpool_bwd", "avgpool_fwd", "avgpool_bwd",
	"bn_stats", "bn_finalize", "inc_i64", "bn_eval_scale", "bn_apply", "bn_grad_sums", "bn_param_grads",
	"bn_dx_coef", "bn_dx", "xent", "sgd", "adam", "sumsq",
	"embed_fwd", "embed_bwd_pos", "embed_bwd_tok", "ln_fwd", "ln_bwd_dx", "ln_param_part", "ln_param_sum",
	"gelu_fwd", "gelu_bwd", "add2", "attn_fwd", "attn_bwd_q", "attn_bwd_kv",
	"flash_fwd", "flash_bwd_q", "flash_bwd_kv",
}

// fail keeps the first error of a queued call: work is queued without
// waiting, so errors are collected and reported at the next Sync.
func (c *Ctx) fail(err error) {
	if err == nil {
		return
	}
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
}

// Err is the first failure so far.
func (c *Ctx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Sync waits for the queued work and returns the first failure.
func (c *Ctx) Sync() error {
	c.fail(check("cuStreamSynchronize", C.cu_stream_sync(c.stream)))
	return c.Err()
}

// MemInfo is the device's free and total memory in bytes.
func (c *Ctx) MemInfo() (free, total uint64) {
	var f, t C.size_t
	c.fail(check("cuMemGetInfo", C.cu_mem_info(&f, &t)))
	return uint64(f), uint64(t)
}

// dptr is a device address, as kernels take it.
type dptr = C.dptr

// launch queues kernel name over n work items (grid-stride kernels: any
// grid is correct; this one fills the GPU without a huge grid). Arguments
// are Bufs (their address), int (as C int), int64, float32, float64 or
// dptr; the values are copied to C memory, as cuLaunchKernel reads them.
func (c *Ctx) launch(name string, n int64, args ...any) {
	c.launchOn(c.stream, name, n, args...)
}

// launchOn is launch on another stream (the ring's).
func (c *Ctx) launchOn(s C.cstream, name string, n int64, args ...any) {
	blocks := min(max((n+255)/256, 1), 132*16)
	c.launchGridOn(s, name, uint(blocks), 1, 256, args...)
}

// launchGrid queues a kernel on a gx x gy grid of block-thread blocks.
func (c *Ctx) launchGrid(name string, gx, gy, block uint, args ...any) {
	c.launchShared(c.stream, name, gx, gy, block, 0, args...)
}

func (c *Ctx) launchGridOn(s C.cstream, name string, gx, gy, block uint, args ...any) {
	c.launchShared(s, name, gx, gy, block, 0, args...)
}

// launchShared is launchGridOn with shared bytes of dynamic shared memory.
func (c *Ctx) launchShared(s C.cstream, name string, gx, gy, block, shared uint, args ...any) {
	fn := c.fns[name]
	if fn == nil {
		c.fail(fmt.Errorf("gpu: no kernel %q", name))
		return
	}
	mem := C.malloc(C.size_t(16 * len(args)))
	defer C.free(mem)
	vals := unsafe.Slice((*uint64)(mem), 2*len(args))
	ptrs := unsafe.Slice((*unsafe.Pointer)(unsafe.Pointer(&vals[len(args)])), len(args))
	for i, a := range args {
		p := unsafe.Pointer(&vals[i])
		switch v := a.(type) {
		case *Buf:
			*(*C.dptr)(p) = 0
			if v != nil {
				*(*C.dptr)(p) = v.ptr
			}
		case Buf:
			*(*C.dptr)(p) = v.ptr
		case dptr:
			*(*C.dptr)(p) = v
		case int:
			*(*int32)(p) = int32(v)
		case bool:
			*(*int32)(p) = 0
			if v {
				*(*int32)(p) = 1
			}
		case int64:
			*(*int64)(p) = v
		case float32:
			*(*float32)(p) = v
		case float64:
			*(*float64)(p) = v
		default:
			panic(fmt.Sprintf("gpu: kernel %s argument %d of type %T", name, i, a))
		}
		ptrs[i] = p
	}
	c.fail(check("cuLaunchKernel("+name+")", C.cu_launch(fn, C.uint(gx), C.uint(gy), 1, C.uint(block), 1, 1, C.uint(shared), s, (*unsafe.Pointer)(unsafe.Pointer(&ptrs[0])))))
}

// Buf is device memory of float32 values (or, for a few, of doubles or
// ints: the kernels decide). An owning Buf frees its memory on Close; a
// view (Slice) does not.
type Buf struct {
	ctx   *Ctx
	ptr   C.dptr
	n     int    // float32 slots
	owned bool   // Close frees it
	base  C.dptr // start of the allocation (the GPU ring's IPC shares allocations)
}

// Alloc returns n float32 slots of device memory, zeroed.
func (c *Ctx) Alloc(n int) (*Buf, error) {
	b := &Buf{ctx: c, n: n, owned: true}
	if n == 0 {
		return b, nil
	}
	if err := check(fmt.Sprintf("cuMemAlloc(%d MiB)", (4*n)>>20), C.cu_alloc(&b.ptr, C.size_t(4*n))); err != nil {
		return nil, err
	}
	b.base = b.ptr
	c.account(int64(4 * n))
	b.Zero()
	return b, nil
}

// MustAlloc is Alloc for sizes known to fit; a failure is kept for Sync.
func (c *Ctx) MustAlloc(n int) *Buf {
	b, err := c.Alloc(n)
	if err != nil {
		c.fail(err)
		return &Buf{ctx: c}
	}
	return b
}

// Len is the number of float32 slots.
func (b *Buf) Len() int { return b.n }

// Ptr is the device address.
func (b *Buf) Ptr() dptr { return b.ptr }

// Slice is a view of slots [off, off+n).
func (b *Buf) Slice(off, n int) *Buf {
	if off < 0 || n < 0 || off+n > b.n {
		panic(fmt.Sprintf("gpu: slice [%d, %d) of %d", off, off+n, b.n))
	}
	return &Buf{ctx: b.ctx, ptr: b.ptr + C.dptr(4*off), n: n, base: b.base}
}

// Close frees an owning Buf.
func (b *Buf) Close() error {
	if !b.owned || b.ptr == 0 {
		return nil
	}
	err := check("cuMemFree", C.cu_free(b.ptr))
	b.ctx.account(-int64(4 * b.n))
	b.ptr, b.n = 0, 0
	return err
}

// closeAll closes the owning buffers among bufs (nil ones are skipped):
// the layers' scratch when a larger batch replaces it.
func closeAll(bufs ...*Buf) {
	for _, b := range bufs {
		if b != nil {
			b.Close()
		}
	}
}

// Zero clears the buffer (queued).
func (b *Buf) Zero() {
	if b.n > 0 {
		b.ctx.fail(check("cuMemsetD32", C.cu_memset32(b.ptr, 0, C.size_t(b.n), b.ctx.stream)))
	}
}

// Upload copies v into the start of the buffer and waits (v is Go memory).
func (b *Buf) Upload(v []float32) error {
	if len(v) > b.n {
		return fmt.Errorf("gpu: upload of %d values into %d", len(v), b.n)
	}
	if len(v) == 0 {
		return nil
	}
	b.ctx.fail(check("cuMemcpyHtoD", C.cu_htod(b.ptr, unsafe.Pointer(&v[0]), C.size_t(4*len(v)), b.ctx.stream)))
	return b.ctx.Sync()
}

// UploadBytes copies raw bytes (int32 labels, say) and waits.
func (b *Buf) UploadBytes(p unsafe.Pointer, bytes int) error {
	if bytes > 4*b.n {
		return fmt.Errorf("gpu: upload of %d bytes into %d", bytes, 4*b.n)
	}
	b.ctx.fail(check("cuMemcpyHtoD", C.cu_htod(b.ptr, p, C.size_t(bytes), b.ctx.stream)))
	return b.ctx.Sync()
}

// Download copies the first len(v) values into v, after the queued work.
func (b *Buf) Download(v []float32) error {
	if len(v) > b.n {
		return fmt.Errorf("gpu: download of %d values from %d", len(v), b.n)
	}
	if len(v) == 0 {
		return b.ctx.Sync()
	}
	b.ctx.fail(check("cuMemcpyDtoH", C.cu_dtoh(unsafe.Pointer(&v[0]), b.ptr, C.size_t(4*len(v)), b.ctx.stream)))
	return b.ctx.Sync()
}

// download64 copies n doubles from the start of the buffer.
func (b *Buf) download64(v []float64) error {
	b.ctx.fail(check("cuMemcpyDtoH", C.cu_dtoh(unsafe.Pointer(&v[0]), b.ptr, C.size_t(8*len(v)), b.ctx.stream)))
	return b.ctx.Sync()
}

// upload64 copies doubles to the start of the buffer.
func (b *Buf) upload64(v []float64) error {
	b.ctx.fail(check("cuMemcpyHtoD", C.cu_htod(b.ptr, unsafe.Pointer(&v[0]), C.size_t(8*len(v)), b.ctx.stream)))
	return b.ctx.Sync()
}

// CopyFrom queues a device-to-device copy of src into the start of b.
func (b *Buf) CopyFrom(src *Buf) {
	if src.n > b.n {
		panic("gpu: CopyFrom a larger buffer")
	}
	if src.n > 0 {
		b.ctx.fail(check("cuMemcpyDtoD", C.cu_dtod(b.ptr, src.ptr, C.size_t(4*src.n), b.ctx.stream)))
	}
}

// Fill sets every value to v (queued).
func (b *Buf) Fill(v float32) { b.ctx.launch("fill", int64(b.n), b, v, int64(b.n)) }

// AddFrom queues b += src over src's length.
func (b *Buf) AddFrom(src *Buf) { b.ctx.launch("add_to", int64(src.n), b, src, int64(src.n)) }

// Scale queues b *= a.
func (b *Buf) Scale(a float32) { b.ctx.launch("scale", int64(b.n), b, a, int64(b.n)) }

// workspace returns at least bytes of scratch for cuDNN.
func (c *Ctx) workspace(bytes int) *Buf {
	if c.ws == nil || 4*c.ws.n < bytes {
		if c.ws != nil {
			c.Sync()
			c.ws.Close()
		}
		c.ws = c.MustAlloc((bytes + 3) / 4)
	}
	return c.ws
}

// gemm is row-major C (m x n) = alpha op(A) op(B) + beta C on float32
// buffers, in the context's precision.
func (c *Ctx) gemm(transA, transB bool, m, n, k int, alpha float32, a *Buf, lda int, b *Buf, ldb int, beta float32, cc *Buf, ldc int) {
	compute := 68 // CUBLAS_COMPUTE_32F
	switch c.Precision {
	case "tf32":
		compute = 77
	case "bf16":
		compute = 75
	}
	c.gemmAs(compute, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, cc, ldc)
}

// sumRows queues db[o] += the sum over rows of dy[r, o] (a bias's
// gradient) as a product with a row of ones, in fp32 whatever the
// context's precision. A column sum has no reuse for a kernel to exploit;
// cuBLAS spreads the rows over the GPU, where our kernel of one thread per
// column took 0.47 ms per call on GPT-2's 8192 rows (H100).
func (c *Ctx) sumRows(db, dy *Buf, rows, out int) {
	if c.ones == nil || c.ones.n < rows {
		if c.ones != nil {
			c.Sync()
			c.ones.Close()
		}
		c.ones = c.MustAlloc(rows)
		c.launch("fill", int64(rows), c.ones, float32(1), int64(rows))
	}
	c.gemmAs(68, false, false, 1, out, rows, 1, c.ones, rows, dy, out, 1, db, out)
}

func (c *Ctx) gemmAs(compute int, transA, transB bool, m, n, k int, alpha float32, a *Buf, lda int, b *Buf, ldb int, beta float32, cc *Buf, ldc int) {
	if r := C.cublas_sgemm_rm(c.blas, cbool(transA), cbool(transB), C.int(m), C.int(n), C.int(k), C.float(alpha), a.ptr, C.int(lda), b.ptr, C.int(ldb), C.float(beta), cc.ptr, C.int(ldc), C.int(compute)); r != 0 {
		c.fail(fmt.Errorf("cublasGemmEx(%dx%dx%d): %s", m, n, k, C.GoString(C.cublas_error_string(r))))
	}
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// GemmGFLOPs times reps n x n x n matrix products in the context's
// precision: the yardstick of `train bench step --device cuda`.
func (c *Ctx) GemmGFLOPs(n, reps int) (float64, error) {
	a, err := c.Alloc(n * n)
	if err != nil {
		return 0, err
	}
	defer a.Close()
	b, err := c.Alloc(n * n)
	if err != nil {
		return 0, err
	}
	defer b.Close()
	a.Fill(1e-3)
	b.Fill(1e-3)
	c.gemm(false, false, n, n, n, 1, a, n, a, n, 0, b, n) // warm-up
	if err := c.Sync(); err != nil {
		return 0, err
	}
	start := time.Now()
	for range reps {
		c.gemm(false, false, n, n, n, 1, a, n, a, n, 0, b, n)
	}
	if err := c.Sync(); err != nil {
		return 0, err
	}
	return 2 * float64(n) * float64(n) * float64(n) * float64(reps) / time.Since(start).Seconds() / 1e9, nil
}

// CopyGBs times device-to-device copies of bytes: bytes copied per second
// (each copy reads and writes them, so memory traffic is twice this).
func (c *Ctx) CopyGBs(bytes, reps int) (float64, error) {
	n := bytes / 4
	a, err := c.Alloc(n)
	if err != nil {
		return 0, err
	}
	defer a.Close()
	b, err := c.Alloc(n)
	if err != nil {
		return 0, err
	}
	defer b.Close()
	b.CopyFrom(a)
	if err := c.Sync(); err != nil {
		return 0, err
	}
	start := time.Now()
	for range reps {
		b.CopyFrom(a)
	}
	if err := c.Sync(); err != nil {
		return 0, err
	}
	return float64(bytes) * float64(reps) / time.Since(start).Seconds() / 1e9, nil
}

// Event marks a point in the context's stream: the GPU gradient buckets
// record one when backward has queued a bucket's last layer, and the
// communication goroutine waits for it before reducing the bucket.
type Event struct {
	c  *Ctx
	ev unsafe.Pointer
}

// NewEvent makes an event (without timing).
func (c *Ctx) NewEvent() (*Event, error) {
	e := &Event{c: c}
	return e, check("cuEventCreate", C.cu_event_create(&e.ev, 0))
}

// Record marks the work queued so far on the context's stream.
func (e *Event) Record() { e.c.fail(check("cuEventRecord", C.cu_event_record(e.ev, e.c.stream))) }

// Wait blocks until the GPU has done the work before Record.
func (e *Event) Wait() error { return check("cuEventSynchronize", C.cu_event_sync(e.ev)) }

// Close destroys the event.
func (e *Event) Close() { C.cu_event_destroy(e.ev) }
