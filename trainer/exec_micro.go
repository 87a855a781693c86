package trainer

import (
	"fmt"

	"train/mpi"
)

// microExecutor runs each rank's batch as M equal micro-batches, one
// after another on the same executor, their gradients summed into the
// one gradient buffer: GPipe's micro-batches on a single stage, and so the
// reference a pipeline must equal (np=1 --micro-batches M). Each
// micro-batch's loss gradient is 1/M of its mean's, so the sum is the
// gradient of the whole batch's mean loss; BatchNorm sees each micro-batch
// alone, as in GPipe. The strategy hears of finished gradients only during
// the last micro-batch's backward, when they are final.
type microExecutor struct {
	Executor
	m     int
	x     []float32
	y     []int32
	mx    []float32 // the micro-batch being run
	my    []int32
	nan   bool
	loss  float64
	right int
	pos   int // labels per sample (the model's Positions)
}

// lossScaler is an executor whose loss gradient can be scaled (the CPU's).
type lossScaler interface{ scaleLoss(float32) }

func newMicroExecutor(e Executor, m, positions int) (Executor, error) {
	ls, ok := e.(lossScaler)
	if !ok {
		return nil, fmt.Errorf("--micro-batches %d: %s cannot run micro-batches", m, e.Describe())
	}
	ls.scaleLoss(1 / float32(m))
	return &microExecutor{Executor: e, m: m, pos: positions}, nil
}

// Forward keeps the batch: the micro-batches' forwards run in Backward,
// each just before its backward, so that only one micro-batch's
// activations are held at a time.
func (e *microExecutor) Forward(x []float32, y []int32) error {
	e.x, e.y, e.nan = x, y, false
	return nil
}

func (e *microExecutor) InjectNaN() { e.nan = true }

func (e *microExecutor) Backward(ready func(lo int)) error {
	n := len(e.y) / e.pos
	if n%e.m != 0 || n == 0 {
		return fmt.Errorf("a batch of %d samples does not split into --micro-batches %d", n, e.m)
	}
	sample, per := len(e.x)/n, n/e.m
	e.mx = grow(e.mx, per*sample)
	e.my = grow(e.my, per*e.pos)
	e.loss, e.right = 0, 0
	for i := range e.m {
		// Micro-batch i is the batch's samples i, i+M, i+2M, ...: with the
		// sampler's interleaving, what rank r*M+i of a job with M times the
		// ranks would draw, so np=1 with M micro-batches meets BatchNorm as
		// np=M with --bn local does.
		for j := range per {
			k := i + j*e.m
			copy(e.mx[j*sample:(j+1)*sample], e.x[k*sample:(k+1)*sample])
			copy(e.my[j*e.pos:(j+1)*e.pos], e.y[k*e.pos:(k+1)*e.pos])
		}
		if err := e.Executor.Forward(e.mx, e.my); err != nil {
			return err
		}
		last := i == e.m-1
		if last && e.nan {
			e.Executor.InjectNaN()
		}
		loss, right, err := e.Executor.Result()
		if err != nil {
			return err
		}
		e.loss += loss / float64(e.m)
		e.right += right
		r := ready
		if !last {
			r = nil
		}
		if err := e.Executor.Backward(r); err != nil {
			return err
		}
	}
	return nil
}

// grow returns b resized to n, reusing its storage when it is enough.
func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

func (e *microExecutor) Result() (float64, int, error) { return e.loss, e.right, nil }

func (e *microExecutor) Reducer(w *mpi.World, algo Algorithm, comp mpi.Compression) (bucketReducer, error) {
	return e.Executor.Reducer(w, algo, comp)
}

func (e *microExecutor) Describe() string {
	return fmt.Sprintf("%s, %d micro-batches per step", e.Executor.Describe(), e.m)
}
