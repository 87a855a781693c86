package trainer

import (
	"fmt"
	"math"

	"train/model"
	"train/mpi"
	"train/optim"
)

// cpuExecutor computes on the host: the model's layers on its flat
// buffers (OpenBLAS behind every matrix product), package optim's update.
type cpuExecutor struct {
	m           *model.Model
	opt         optim.Optimizer
	blas        string
	logits      []float32
	loss        float64
	correct, nb int
	lossScale   float32 // the loss gradient's factor besides 1/rows (micro-batches: 1/M); 0 is 1
}

// scaleLoss makes later Forwards' loss gradients scale times the batch's
// mean (exec_micro.go: each of M micro-batches carries 1/M of the step).
func (e *cpuExecutor) scaleLoss(scale float32) { e.lossScale = scale }

func newCPUExecutor(s *Session) (Executor, error) {
	return &cpuExecutor{m: s.Model, opt: s.Opt, blas: s.blas}, nil
}

func (e *cpuExecutor) ZeroGrad() { model.Zero(e.m.Params.Grad) }

// Forward: y holds a label per position of every sample (one for an
// image, context for gpt); the loss is the mean over them all.
func (e *cpuExecutor) Forward(x []float32, y []int32) error {
	b := len(y) / e.m.Positions()
	e.nb = b
	e.logits = e.m.Forward(x, b)
	d := e.m.LossGrad(b)
	e.loss, e.correct = e.m.Loss(d, e.logits, y, len(y))
	if s := e.lossScale; s != 0 && s != 1 {
		model.Scale(d, s)
	}
	return nil
}

func (e *cpuExecutor) InjectNaN() { e.m.LossGrad(e.nb)[0] = float32(math.NaN()) }

func (e *cpuExecutor) Backward(ready func(lo int)) error {
	e.m.OnGradReady = ready
	e.m.Backward(e.nb)
	return nil
}

func (e *cpuExecutor) Reducer(w *mpi.World, algo Algorithm, comp mpi.Compression) (bucketReducer, error) {
	r, err := newHostReducer(w, algo, comp)
	if err != nil {
		return nil, err
	}
	// The gradient moves into the segment the host's ranks share, where
	// the allreduce reads the other ranks' copies directly.
	if p := e.m.Params; r.share != nil {
		buf, name, err := r.share(len(p.Grad))
		if err != nil {
			r.name += fmt.Sprintf(" (not through shared memory: %v)", err)
		} else {
			copy(buf, p.Grad)
			p.Grad, r.name = buf, name
		}
	}
	return &cpuBuckets{hostReducer: r, grad: e.m.Params.Grad}, nil
}

func (e *cpuExecutor) Settle() error { return nil }

func (e *cpuExecutor) Update(lr float64, t int, clip float64) (bool, error) {
	p := e.m.Params
	if clip > 0 {
		optim.ClipGradNorm(p.Grad, clip)
	}
	return e.opt.Step(p.Data, p.Grad, float32(lr), t), nil
}

func (e *cpuExecutor) Result() (float64, int, error) { return e.loss, e.correct, nil }

func (e *cpuExecutor) Evaluate(x []float32, y []int32, n int) (float64, int, error) {
	logits := e.m.Forward(x, n)
	rows := n * e.m.Positions()
	loss, correct := e.m.Loss(nil, logits, y[:rows], rows)
	return loss, correct, nil
}

func (e *cpuExecutor) ToHost() error    { return nil }
func (e *cpuExecutor) ToDevice() error  { return nil }
func (e *cpuExecutor) Ahead() bool      { return false }
func (e *cpuExecutor) Describe() string { return e.blas }
func (e *cpuExecutor) Close()           {}

// cpuBuckets reduces buckets of the host gradient buffer with a host
// algorithm.
type cpuBuckets struct {
	hostReducer
	grad []float32
}

func (c *cpuBuckets) use([]bucket) error    { return nil }
func (c *cpuBuckets) mark(bucket)           {}
func (c *cpuBuckets) reduce(b bucket) error { return c.fn(c.grad[b.lo:b.hi], mpi.Mean) }
func (c *cpuBuckets) whole() bool           { return false }
func (c *cpuBuckets) describe() string      { return c.name }
func (c *cpuBuckets) close()                { c.free() }
