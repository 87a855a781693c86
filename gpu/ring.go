package gpu

// #include "shim.h"
import "C"

import (
	"fmt"
	"unsafe"
)

// Comm is what the GPU collectives need of MPI; *mpi.World has it.
type Comm interface {
	Rank() int
	Size() int
	LocalSize() int
	SendrecvBytes(send []byte, dest int, recv []byte, source, tag int) error
	BcastBytes(buf []byte, root int) error
	Barrier() error
}

// Ring is our ring allreduce over device buffers: reduce-scatter then
// all-gather, 2(N-1) steps, chunks differing in length by at most one
// float, the reduction a CUDA kernel. Two transports:
//
//   - ipc (every rank on one node): each rank maps its left neighbour's
//     buffer into its address space once (CUDA IPC) and each step is one
//     kernel reading the neighbour's chunk straight from device memory
//     (reduce-scatter: add; all-gather: copy), then a barrier. Nothing
//     goes through the host.
//   - host (any placement): each step's chunk goes device -> pinned host
//     buffer -> MPI_Sendrecv -> pinned buffer, which the add kernel reads
//     directly (mapped memory), in segments of RingSegment bytes.
//
// Mean scales only the rank's own finished chunk before the all-gather,
// so every rank ends with the same bits.
type Ring struct {
	c      *Ctx
	w      Comm
	stream C.cstream // the ring's own: it runs beside backward on the context's stream
	ipc    bool
	left   map[C.dptr]C.dptr // our allocation -> the left neighbour's, mapped
	pinned unsafe.Pointer    // send and receive halves, seg bytes each
	seg    int
}

// RingSegment is the host transport's segment size in bytes.
var RingSegment = 4 << 20

// NewRing sets up the ring on comm. mode is "auto" (ipc when every rank is
// on this node), "ipc" or "host" (--gpu-ring).
func NewRing(c *Ctx, w Comm, mode string) (*Ring, error) {
	r := &Ring{c: c, w: w, left: map[C.dptr]C.dptr{}, seg: RingSegment}
	if err := check("cuStreamCreate", C.cu_stream_create(&r.stream)); err != nil {
		return nil, err
	}
	switch mode {
	case "auto":
		r.ipc = w.LocalSize() == w.Size()
	case "ipc":
		if w.LocalSize() != w.Size() {
			return nil, fmt.Errorf("GPU ring over CUDA IPC needs every rank on one node (%d of %d here)", w.LocalSize(), w.Size())
		}
		r.ipc = true
	case "host":
	default:
		return nil, fmt.Errorf("--gpu-ring %q: choose auto, ipc or host", mode)
	}
	if !r.ipc && w.Size() > 1 {
		if err := check("cuMemHostAlloc", C.cu_host_alloc(&r.pinned, C.size_t(2*r.seg))); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Transport is "ipc" or "host".
func (r *Ring) Transport() string {
	if r.ipc {
		return "ipc"
	}
	return "host"
}

// chunk is [lo, hi) of chunk j of n values over size ranks.
func chunk(j, n, size int) (int, int) { return j * n / size, (j + 1) * n / size }

func mod(a, n int) int { return ((a % n) + n) % n }

// Allreduce sums b over the ranks in place (mean: divides by their
// number), after the work queued on the context's stream. Every rank
// calls it with the same buffer layout.
func (r *Ring) Allreduce(b *Buf, mean bool) error {
	if err := r.c.Sync(); err != nil { // our part of b is final
		return err
	}
	return r.reduce(b, mean)
}

// AllreduceAfter is Allreduce once ev has passed: b is final when the
// work queued before ev.Record is done, while later work (backward's
// next layers) goes on. It may run in another goroutine than the one
// queueing that work.
func (r *Ring) AllreduceAfter(ev *Event, b *Buf, mean bool) error {
	if err := ev.Wait(); err != nil {
		return err
	}
	return r.reduce(b, mean)
}

func (r *Ring) reduce(b *Buf, mean bool) error {
	N := r.w.Size()
	if N == 1 || b.n == 0 {
		return r.c.Err()
	}
	if r.ipc {
		return r.allreduceIPC(b, mean)
	}
	return r.allreduceHost(b, mean)
}

// leftOf maps the left neighbour's copy of b's allocation (a collective
// exchange of IPC handles the first time an allocation is seen).
func (r *Ring) leftOf(b *Buf) (C.dptr, error) {
	if p, ok := r.left[b.base]; ok {
		return p + (b.ptr - b.base), nil
	}
	N, me := r.w.Size(), r.w.Rank()
	var mine, theirs [64]byte
	if err := check("cuIpcGetMemHandle", C.cu_ipc_handle(unsafe.Pointer(&mine[0]), b.base)); err != nil {
		return 0, err
	}
	if err := r.w.SendrecvBytes(mine[:], mod(me+1, N), theirs[:], mod(me-1, N), 91); err != nil {
		return 0, err
	}
	var p C.dptr
	if err := check("cuIpcOpenMemHandle", C.cu_ipc_open(&p, unsafe.Pointer(&theirs[0]))); err != nil {
		return 0, err
	}
	r.left[b.base] = p
	return p + (b.ptr - b.base), nil
}

// sync waits for the ring's stream.
func (r *Ring) sync() error {
	r.c.fail(check("cuStreamSynchronize", C.cu_stream_sync(r.stream)))
	return r.c.Err()
}

// step ends a ring step: our kernels are done, then everyone's.
func (r *Ring) step() error {
	if err := r.sync(); err != nil {
		return err
	}
	return r.w.Barrier()
}

func (r *Ring) allreduceIPC(b *Buf, mean bool) error {
	N, me, n := r.w.Size(), r.w.Rank(), b.n
	left, err := r.leftOf(b)
	if err != nil {
		return err
	}
	if err := r.w.Barrier(); err != nil { // every rank's buffer is final
		return err
	}
	for s := range N - 1 {
		lo, hi := chunk(mod(me-s-1, N), n, N)
		r.c.launchOn(r.stream, "add_to", int64(hi-lo), b.Slice(lo, hi-lo), left+C.dptr(4*lo), int64(hi-lo))
		if mean && s == N-2 {
			r.c.launchOn(r.stream, "scale", int64(hi-lo), b.Slice(lo, hi-lo), 1/float32(N), int64(hi-lo))
		}
		if err := r.step(); err != nil {
			return err
		}
	}
	for t := range N - 1 {
		lo, hi := chunk(mod(me-t, N), n, N)
		if hi > lo {
			r.c.fail(check("cuMemcpyDtoD", C.cu_dtod(b.ptr+C.dptr(4*lo), left+C.dptr(4*lo), C.size_t(4*(hi-lo)), r.stream)))
		}
		if err := r.step(); err != nil {
			return err
		}
	}
	return r.c.Err()
}

func (r *Ring) allreduceHost(b *Buf, mean bool) error {
	N, me, n := r.w.Size(), r.w.Rank(), b.n
	right, leftRank := mod(me+1, N), mod(me-1, N)
	segF := r.seg / 4
	maxChunk := (n + N - 1) / N
	nseg := max(1, (maxChunk+segF-1)/segF)
	send := unsafe.Slice((*byte)(r.pinned), r.seg)
	recv := unsafe.Slice((*byte)(unsafe.Add(r.pinned, r.seg)), r.seg)
	recvDev := C.dptr(uintptr(unsafe.Add(r.pinned, r.seg)))
	// shift sends segment k of chunk sj and receives segment k of chunk rj,
	// then adds or copies it into b.
	shift := func(sj, rj int, add bool) error {
		slo, shi := chunk(sj, n, N)
		rlo, rhi := chunk(rj, n, N)
		for k := range nseg {
			a0, a1 := min(slo+k*segF, shi), min(slo+(k+1)*segF, shi)
			b0, b1 := min(rlo+k*segF, rhi), min(rlo+(k+1)*segF, rhi)
			if a1 > a0 {
				r.c.fail(check("cuMemcpyDtoH", C.cu_dtoh(r.pinned, b.ptr+C.dptr(4*a0), C.size_t(4*(a1-a0)), r.stream)))
				if err := r.sync(); err != nil {
					return err
				}
			}
			if err := r.w.SendrecvBytes(send[:4*(a1-a0)], right, recv[:4*(b1-b0)], leftRank, 92); err != nil {
				return err
			}
			if b1 > b0 {
				if add {
					r.c.launchOn(r.stream, "add_to", int64(b1-b0), b.Slice(b0, b1-b0), recvDev, int64(b1-b0))
				} else {
					r.c.fail(check("cuMemcpyHtoD", C.cu_htod(b.ptr+C.dptr(4*b0), unsafe.Pointer(&recv[0]), C.size_t(4*(b1-b0)), r.stream)))
				}
				if err := r.sync(); err != nil { // recv is reused by the next segment
					return err
				}
			}
		}
		return nil
	}
	for s := range N - 1 {
		if err := shift(mod(me-s, N), mod(me-s-1, N), true); err != nil {
			return err
		}
	}
	if mean {
		lo, hi := chunk(mod(me+1, N), n, N)
		r.c.launchOn(r.stream, "scale", int64(hi-lo), b.Slice(lo, hi-lo), 1/float32(N), int64(hi-lo))
	}
	for t := range N - 1 {
		if err := shift(mod(me+1-t, N), mod(me-t, N), false); err != nil {
			return err
		}
	}
	return r.sync()
}

// Close unmaps the neighbours' buffers and frees the pinned memory.
func (r *Ring) Close() {
	C.cu_stream_destroy(r.stream)
	for _, p := range r.left {
		C.cu_ipc_close(p)
	}
	r.left = nil
	if r.pinned != nil {
		C.cu_host_free(r.pinned)
		r.pinned = nil
	}
}

// NCCL is NVIDIA's allreduce, the baseline: a communicator bootstrapped
// with the unique id rank 0 broadcasts over MPI.
type NCCL struct {
	c    *Ctx
	comm unsafe.Pointer
	size int
}

// NewNCCL opens libnccl and joins every rank of w into one communicator.
// NCCL refuses two ranks on one GPU; the error says so.
func NewNCCL(c *Ctx, w Comm) (*NCCL, error) {
	if err := lib(c.libs.NCCL, func(p, e *C.char, n C.int) C.int { return C.nccl_load(p, e, n) }, LibNCCL, "libnccl.so"); err != nil {
		return nil, fmt.Errorf("--allreduce nccl needs NCCL: %v", err)
	}
	// NCCL refuses ranks that share a GPU, and its refusal has been seen
	// to take a process down with it: say so before asking.
	if n, err := Count(); err == nil && w.LocalSize() > n {
		return nil, fmt.Errorf("--allreduce nccl needs one GPU per rank: %d ranks share this node's %d GPU(s); use --allreduce ring", w.LocalSize(), n)
	}
	var id [128]byte
	if w.Rank() == 0 {
		if r := C.nccl_unique_id(unsafe.Pointer(&id[0])); r != 0 {
			return nil, fmt.Errorf("ncclGetUniqueId: %s", C.GoString(C.nccl_error_string(r)))
		}
	}
	if err := w.BcastBytes(id[:], 0); err != nil {
		return nil, err
	}
	x := &NCCL{c: c, size: w.Size()}
	if r := C.nccl_init(&x.comm, C.int(w.Size()), unsafe.Pointer(&id[0]), C.int(w.Rank())); r != 0 {
		return nil, fmt.Errorf("ncclCommInitRank: %s", C.GoString(C.nccl_error_string(r)))
	}
	return x, nil
}

// Allreduce sums b over the ranks in place (mean: divides by their number).
func (x *NCCL) Allreduce(b *Buf, mean bool) error {
	if b.n == 0 {
		return nil
	}
	if r := C.nccl_allreduce_sum_f32(x.comm, b.ptr, C.size_t(b.n), x.c.stream); r != 0 {
		return fmt.Errorf("ncclAllReduce: %s", C.GoString(C.nccl_error_string(r)))
	}
	if mean {
		b.Scale(1 / float32(x.size))
	}
	return x.c.Sync()
}

// Close destroys the communicator.
func (x *NCCL) Close() {
	if x.comm != nil {
		C.nccl_destroy(x.comm)
		x.comm = nil
	}
}
