package trainer

import (
	"fmt"
	"math"
	"time"

	"train/flightrec"
	"train/gpu"
	"train/mpi"
	"train/optim"
)

// cudaExecutor computes on this rank's GPU (local rank % GPUs): the
// model's layers on NCHW device buffers with the host model's flat
// parameter, gradient and buffer layouts (gpu.Net), the optimizer's update
// and state there. Work is queued on one stream; a step uploads its batch
// and labels first, queues forward, the loss and backward without waiting,
// and reads the loss after the update.
type cudaExecutor struct {
	ctx     *gpu.Ctx
	net     *gpu.Net
	opt     *gpu.Optim
	prec    gpu.Precision
	ringWay string // --gpu-ring
	overlap bool   // --overlap: ring buckets reduced while backward runs
	fence   bool   // synchronise after backward: its buckets are not overlapped
	nb      int
	grad    []float32 // the host model's gradient buffer (the mpi reducer's way through the host)
}

func newCUDAExecutor(s *Session) (Executor, error) {
	d := &s.Cfg.Device
	ctx, err := gpu.Open(s.W.LocalRank(), d.Precision, d.GPU)
	if err != nil {
		return nil, fmt.Errorf("--device cuda: %v; train on the CPU with --device cpu", err)
	}
	e := &cudaExecutor{ctx: ctx, prec: d.Precision, ringWay: d.GPURing, overlap: s.Cfg.Dist.Overlap, fence: true, grad: s.Model.Params.Grad}
	if e.net, err = gpu.NewNet(ctx, s.Model); err != nil {
		return nil, fmt.Errorf("--device cuda: %v", err)
	}
	if e.opt, err = gpu.NewOptim(ctx, s.Opt); err != nil {
		return nil, fmt.Errorf("--device cuda: %v", err)
	}
	s.rep.say("GPU: rank %d on %v, %s\n", s.W.Rank(), ctx.Dev, d.Precision)
	return e, nil
}

func (e *cudaExecutor) ZeroGrad() { e.net.G.Zero() }

func (e *cudaExecutor) Forward(x []float32, y []int32) error {
	e.nb = len(y) / e.net.Positions() // gpt: a label per position
	if err := e.net.ForwardLabeled(x, y, e.nb); err != nil {
		return err
	}
	e.net.QueueLoss(e.nb) // read after the update: the GPU is not drained between forward and backward
	return nil
}

func (e *cudaExecutor) InjectNaN() { e.net.LossGrad().Upload([]float32{float32(math.NaN())}) }

func (e *cudaExecutor) Backward(ready func(lo int)) error {
	e.net.OnGradReady = ready
	if err := e.net.Backward(e.nb); err != nil {
		return err
	}
	if e.fence { // else the step's backward time is the time to queue it
		return e.ctx.Sync()
	}
	return nil
}

func (e *cudaExecutor) Reducer(w *mpi.World, algo Algorithm, _ mpi.Compression) (bucketReducer, error) {
	switch algo {
	case Ring:
		r, err := gpu.NewRing(e.ctx, ringComm{w}, e.ringWay)
		if err != nil {
			return nil, fmt.Errorf("--device cuda: %v", err)
		}
		e.fence = !e.overlap
		return &gpuRingBuckets{e: e, w: w, ring: r, ev: map[int]*gpu.Event{}}, nil
	case NCCL:
		return &gpuNCCL{e: e, w: w}, nil
	}
	return &gpuViaHost{e: e, w: w, host: e.grad}, nil
}

func (e *cudaExecutor) Settle() error { return e.ctx.Sync() }

func (e *cudaExecutor) Update(lr float64, t int, clip float64) (bool, error) {
	if clip > 0 {
		s, err := e.ctx.SumSquares(e.net.G)
		if err != nil {
			return false, err
		}
		if c := optim.ClipScale(math.Sqrt(s), clip); c < 1 {
			e.net.G.Scale(float32(c))
		}
	}
	return e.opt.Step(e.net.P, e.net.G, float32(lr), t)
}

func (e *cudaExecutor) Result() (float64, int, error) { return e.net.LossResult(e.nb) }

func (e *cudaExecutor) Evaluate(x []float32, y []int32, n int) (float64, int, error) {
	if err := e.net.Forward(x, n); err != nil {
		return 0, 0, err
	}
	return e.net.Loss(y, n, false)
}

func (e *cudaExecutor) ToHost() error {
	if err := e.net.Download(); err != nil {
		return err
	}
	return e.opt.Download()
}

func (e *cudaExecutor) ToDevice() error {
	if err := e.net.Upload(); err != nil {
		return err
	}
	return e.opt.Upload()
}

func (e *cudaExecutor) Ahead() bool      { return true }
func (e *cudaExecutor) Describe() string { return fmt.Sprintf("%v, %s", e.ctx.Dev, e.prec) }

func (e *cudaExecutor) Close() {}

// gpuRingBuckets reduces buckets of the device gradient with our ring:
// with overlap, handing a bucket over records an event on the compute
// stream, and the communication goroutine reduces the bucket on the ring's
// own stream once the GPU has passed it, while backward's later kernels
// run; without, bucket by bucket after backward.
type gpuRingBuckets struct {
	e    *cudaExecutor
	w    *mpi.World // the ring's ranks, for the flight recorder
	ring *gpu.Ring
	ev   map[int]*gpu.Event // by bucket start; read-only once use made it
}

func (g *gpuRingBuckets) use(bs []bucket) error {
	ev := map[int]*gpu.Event{}
	for _, b := range bs {
		e, err := g.e.ctx.NewEvent()
		if err != nil {
			return err
		}
		ev[b.lo] = e
	}
	g.ev = ev
	return nil
}

// ringComm is the World as the GPU ring sees it: its barriers between
// steps are not recorded, as its shifts are not, so the recorder holds one
// allreduce per bucket (a hung rank's dump names the bucket, not a barrier).
type ringComm struct{ *mpi.World }

func (c ringComm) Barrier() error { return c.QuietBarrier() }

func (g *gpuRingBuckets) mark(b bucket) { g.ev[b.lo].Record() }

func (g *gpuRingBuckets) flightComm() *flightrec.Comm { return g.w.Flight() }

// The ring's shifts are its own (its SendrecvBytes are not recorded): the
// recorder sees one allreduce per bucket, as on the CPU.
func (g *gpuRingBuckets) reduce(b bucket) (err error) {
	fl := g.w.Flight()
	id := fl.Begin("allreduce", "gpu ring "+g.ring.Transport(), flightrec.All, 4*int64(b.hi-b.lo), "float32")
	defer func() { fl.End(id, err) }()
	G := g.e.net.G.Slice(b.lo, b.hi-b.lo)
	if g.e.overlap {
		return g.ring.AllreduceAfter(g.ev[b.lo], G, true)
	}
	return g.ring.Allreduce(G, true)
}

func (g *gpuRingBuckets) whole() bool { return false }

func (g *gpuRingBuckets) describe() string {
	return "ring over " + map[string]string{"ipc": "CUDA IPC", "host": "pinned host buffers"}[g.ring.Transport()]
}

func (g *gpuRingBuckets) close() { g.ring.Close() }

// gpuNCCL reduces the whole device gradient after backward with NCCL,
// its communicator made at the first allreduce, once every rank is known
// to have set up.
type gpuNCCL struct {
	e    *cudaExecutor
	w    *mpi.World
	nccl *gpu.NCCL
}

func (g *gpuNCCL) use([]bucket) error { return nil }
func (g *gpuNCCL) mark(bucket)        {}
func (g *gpuNCCL) whole() bool        { return true }
func (g *gpuNCCL) describe() string   { return "nccl" }

func (g *gpuNCCL) flightComm() *flightrec.Comm { return g.w.Flight() }

func (g *gpuNCCL) reduce(b bucket) (err error) {
	fl := g.w.Flight()
	id := fl.Begin("allreduce", "nccl", flightrec.All, 4*int64(b.hi-b.lo), "float32")
	defer func() { fl.End(id, err) }()
	if g.nccl == nil {
		x, err := gpu.NewNCCL(g.e.ctx, g.w)
		if err != nil {
			return err
		}
		g.nccl = x
	}
	return g.nccl.Allreduce(g.e.net.G, true)
}

func (g *gpuNCCL) close() {
	if g.nccl != nil {
		g.nccl.Close()
	}
}

// gpuViaHost reduces the whole device gradient after backward through the
// host: down to the host model's gradient buffer, MPI_Allreduce, back up.
type gpuViaHost struct {
	e    *cudaExecutor
	w    *mpi.World
	host []float32
}

func (g *gpuViaHost) use([]bucket) error { return nil }
func (g *gpuViaHost) mark(bucket)        {}
func (g *gpuViaHost) whole() bool        { return true }
func (g *gpuViaHost) describe() string   { return "mpi" }
func (g *gpuViaHost) close()             {}

func (g *gpuViaHost) flightComm() *flightrec.Comm { return g.w.Flight() }

func (g *gpuViaHost) reduce(bucket) error {
	G := g.e.net.G
	if err := G.Download(g.host); err != nil {
		return err
	}
	if err := g.w.AllreduceFloat32(g.host, mpi.Mean); err != nil {
		return err
	}
	return G.Upload(g.host)
}

// GEMM is train bench step's yardstick on the GPU: a 4096^3 GEMM in the
// run's precision.
func (e *cudaExecutor) GEMM() (string, func() (float64, error)) {
	return fmt.Sprintf("GPU GEMM 4096^3 (%s)", e.prec), func() (float64, error) { return e.ctx.GemmGFLOPs(4096, 20) }
}

// PeakBytes is the peak of device memory train's allocations held.
func (e *cudaExecutor) PeakBytes() int64 { return e.ctx.PeakBytes() }

// Profile is --gpu-profile's time per layer kind (nil without it).
func (e *cudaExecutor) Profile() map[string]time.Duration { return e.ctx.Profile }
