package trainer

import (
	"fmt"
	"math"
	"time"

	"train/gpu"
	"train/mpi"
)

// gpuRun is the GPU side of a run (--device cuda): the network on the
// device with its flat parameter and gradient buffers, the optimizer's
// update and state there, and the gradient allreduce over device buffers.
// The host model keeps a copy that is brought up to date (toHost) before
// anything reads it: evaluation sums, checkpoints, the replica check.
type gpuRun struct {
	ctx  *gpu.Ctx
	net  *gpu.Net
	opt  *gpu.Optim
	ring *gpu.Ring
	nccl *gpu.NCCL
}

// attach makes the gradient buckets of g reduce the device's gradient
// with the ring: with overlap, each bucket is marked by an event on the
// GPU's queue when backward hands it over, and the communication
// goroutine reduces it (on the ring's own stream) once the GPU has
// passed that mark, while backward's remaining layers run; without,
// after backward, bucket by bucket. Only --allreduce ring has buckets
// on the GPU; nccl and mpi reduce the whole gradient.
func (g *gpuRun) attach(s *gradSync) {
	g.net.OnGradReady = nil
	if g.ring == nil {
		return
	}
	G := g.net.G
	ev := map[int]*gpu.Event{} // by bucket start; read-only once made
	for _, b := range s.buckets {
		e, err := g.ctx.NewEvent()
		if err != nil {
			return // the step's allreduce reports the context's error
		}
		ev[b.lo] = e
	}
	s.hand = func(b bucket) { ev[b.lo].Record() }
	s.reduceRange = func(lo, hi int) error {
		if s.overlap {
			return g.ring.AllreduceAfter(ev[lo], G.Slice(lo, hi-lo), true)
		}
		return g.ring.Allreduce(G.Slice(lo, hi-lo), true)
	}
	g.net.OnGradReady = s.ready
}

// setupGPU opens this rank's GPU (local rank % GPUs), compiles the kernels
// and mirrors the model and optimizer there. NCCL's communicator is made
// at the first allreduce, once every rank is known to have set up.
func (r *run) setupGPU() error {
	c := &r.cfg
	ctx, err := gpu.Open(r.w.LocalRank(), gpu.Precision(c.Precision))
	if err != nil {
		return fmt.Errorf("--device cuda: %v; train on the CPU with --device cpu", err)
	}
	g := &gpuRun{ctx: ctx}
	if g.net, err = gpu.NewNet(ctx, r.model); err != nil {
		return fmt.Errorf("--device cuda: %v", err)
	}
	if g.opt, err = gpu.NewOptim(ctx, r.opt); err != nil {
		return fmt.Errorf("--device cuda: %v", err)
	}
	if c.Allreduce == "ring" {
		if g.ring, err = gpu.NewRing(ctx, r.w, "auto"); err != nil {
			return fmt.Errorf("--device cuda: %v", err)
		}
	}
	r.gpu = g
	g.attach(r.sync)
	r.rep.say("GPU: rank %d on %v, %s\n", r.w.Rank(), ctx.Dev, c.Precision)
	return nil
}

// toDevice uploads the host's parameters, buffers and optimizer state
// (after initialisation, a resume or the broadcast).
func (g *gpuRun) toDevice() error {
	if err := g.net.Upload(); err != nil {
		return err
	}
	return g.opt.Upload()
}

// toHost downloads parameters, buffers and optimizer state.
func (g *gpuRun) toHost() error {
	if err := g.net.Download(); err != nil {
		return err
	}
	return g.opt.Download()
}

// allreduce averages the gradient buffer over the ranks.
func (r *run) gpuAllreduce() error {
	g := r.gpu
	G := g.net.G
	switch r.cfg.Allreduce {
	case "nccl":
		if g.nccl == nil {
			x, err := gpu.NewNCCL(g.ctx, r.w)
			if err != nil {
				return err
			}
			g.nccl = x
		}
		return g.nccl.Allreduce(G, true)
	}
	p := r.model.Params.Grad // mpi: through the host
	if err := G.Download(p); err != nil {
		return err
	}
	if err := r.w.AllreduceFloat32(p, mpi.Mean); err != nil {
		return err
	}
	return G.Upload(p)
}

// gpuStep is step on the GPU: forward, loss, backward, allreduce, update.
func (r *run) gpuStep(x []float32, y []int32, lr float64, st *stepTimes, lap func() time.Duration) (float64, int, bool, error) {
	g := r.gpu
	b := len(y)
	g.net.G.Zero()
	if err := g.net.ForwardLabeled(x, y, b); err != nil {
		return 0, 0, false, err
	}
	g.net.QueueLoss(b) // read after the update: the GPU is not drained between forward and backward
	var err error
	if r.fault.is("nan", r.w.Rank(), r.state.Step) {
		g.net.LossGrad().Upload([]float32{float32(math.NaN())})
	}
	st.forward = lap()
	if g.ring != nil { // buckets, overlapped with backward unless --overlap=false
		r.sync.begin()
		if err := g.net.Backward(b); err != nil {
			return 0, 0, false, err
		}
		if !r.cfg.Overlap {
			if err := g.ctx.Sync(); err != nil {
				return 0, 0, false, err
			}
		}
		st.backward = lap() // with overlap: the time to queue backward
		r.prog.enter(opGradients)
		err = r.sync.finish()
		r.prog.leave()
		if err == nil {
			err = g.ctx.Sync()
		}
		if err != nil {
			return 0, 0, false, err
		}
		st.wait = lap()
	} else {
		if err := g.net.Backward(b); err != nil {
			return 0, 0, false, err
		}
		if err := g.ctx.Sync(); err != nil {
			return 0, 0, false, err
		}
		st.backward = lap()
		r.prog.enter(opGradients)
		err = r.gpuAllreduce()
		r.prog.leave()
		if err != nil {
			return 0, 0, false, err
		}
		st.wait = lap()
		r.sync.waiting += st.wait
	}
	if r.bnErr != nil {
		return 0, 0, false, r.bnErr
	}
	if m := r.cfg.ClipGradNorm; m > 0 {
		s, err := g.ctx.SumSquares(g.net.G)
		if err != nil {
			return 0, 0, false, err
		}
		if coef := m / (math.Sqrt(s) + 1e-6); coef < 1 {
			g.net.G.Scale(float32(coef))
		}
	}
	finite, err := g.opt.Step(g.net.P, g.net.G, float32(lr), r.state.Step+1)
	if err != nil {
		return 0, 0, false, err
	}
	loss, correct, err := g.net.LossResult(b)
	return loss, correct, finite, err
}
