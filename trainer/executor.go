package trainer

import (
	"errors"
	"fmt"

	"train/flightrec"
	"train/mpi"
)

// Executor is the arithmetic of a step on one device (--device): the loop
// asks it, per step, for Forward, Backward (which reports as gradients
// become final, so the strategy can start reducing them while backward
// goes on), and, unless parameter servers did the update, Update; Result
// after that. The host model (Session.Model) is the copy everything else
// reads: checkpoints, broadcasts, averages, the replica check; an executor
// that keeps its own copy on a device brings it up to date in ToHost and
// takes it back in ToDevice.
//
// A device's executor is a file of its own, registered in executors.
type Executor interface {
	// ZeroGrad clears the gradient buffer.
	ZeroGrad()
	// Forward runs the model in training mode on batch (x, y) and computes
	// the loss and its gradient; Result reads the loss.
	Forward(x []float32, y []int32) error
	// InjectNaN makes the loss gradient NaN (the nan fault, for tests).
	InjectNaN()
	// Backward adds the batch's gradients into the gradient buffer,
	// calling ready(lo) each time those from lo on are final.
	Backward(ready func(lo int)) error
	// Reducer averages gradient buckets over w's ranks with algo (and, on
	// the host, comp on the wire).
	Reducer(w *mpi.World, algo Algorithm, comp mpi.Compression) (bucketReducer, error)
	// Settle waits for the step's queued work, once the gradients are
	// reduced, and reports its first failure.
	Settle() error
	// Update scales the gradient to at most clip in L2 norm (0: no
	// clipping) and applies update t at rate lr; finite is false when a
	// gradient was NaN or infinite (the parameters are then spoilt).
	Update(lr float64, t int, clip float64) (finite bool, err error)
	// Result is the step's mean loss and correct count on this rank.
	Result() (loss float64, correct int, err error)
	// Evaluate runs the n samples of (x, y) in evaluation mode and
	// returns their mean loss and correct count.
	Evaluate(x []float32, y []int32, n int) (loss float64, correct int, err error)
	// ToHost and ToDevice copy parameters, buffers and optimizer state
	// between the device and the host model.
	ToHost() error
	ToDevice() error
	// Ahead reports whether batches should be built ahead, while the
	// device steps (the CPU computes the step itself: no).
	Ahead() bool
	// Describe says where the arithmetic runs, for the log.
	Describe() string
	Close()
}

// executors builds the executor of each --device.
var executors = map[Device]func(s *Session) (Executor, error){
	CPU:  newCPUExecutor,
	CUDA: newCUDAExecutor,
}

// bucketReducer averages buckets of the gradient buffer across the ranks,
// in place. gradSync calls mark on the training goroutine as it hands a
// bucket over, and reduce on the goroutine that reduces it.
type bucketReducer interface {
	// use prepares for these buckets (before any is marked).
	use(bs []bucket) error
	mark(b bucket)
	reduce(b bucket) error
	// whole reports that the algorithm reduces the whole gradient after
	// backward (one bucket, not overlapped).
	whole() bool
	describe() string
	close()
}

// hostReducer is --allreduce on host buffers.
type hostReducer struct {
	fn   func([]float32, mpi.Op) error // averages (Mean) or sums a slice over the ranks, in place
	free func()                        // frees its communicators
	name string                        // for the log: "hier (2 hosts), fp16 on the wire"
	// share, when set, places a buffer of n floats in memory the host's
	// ranks share, where fn reduces it without a kernel copy (mpi.Shm):
	// the gradient. It returns the buffer to use instead and the name to
	// log, or why it could not (collective: the same on every rank).
	share func(n int) ([]float32, string, error)
	w     *mpi.World // whose flight recorder sees its allreduces
}

// flightComm is the recorder counters of the World a reducer's
// collectives run on, so gradSync can label each bucket's.
type flightComm interface {
	flightComm() *flightrec.Comm
}

func (r hostReducer) flightComm() *flightrec.Comm { return r.w.Flight() }

// newHostReducer builds algo over w's ranks; comp puts 16-bit floats on
// the ring's wire (gradients only).
func newHostReducer(w *mpi.World, algo Algorithm, comp mpi.Compression) (hostReducer, error) {
	r := hostReducer{fn: w.RingAllreduceFloat32, free: func() {}, name: algo.String(), w: w}
	switch algo {
	case MPIAllreduce:
		r.fn = w.AllreduceFloat32
	case Hier:
		h, err := w.NewHier()
		if err != nil {
			return r, err
		}
		h.Compress = comp
		r.fn, r.free, r.name = h.AllreduceFloat32, func() { h.Free() }, fmt.Sprintf("hier (%d hosts)", h.Hosts())
		if w.LocalSize() > 1 {
			name := r.name + ", shared memory within each"
			r.share = func(n int) ([]float32, string, error) {
				buf, err := h.UseShm(n)
				return buf, name, err
			}
		}
	default:
		if comp != mpi.None {
			r.fn = func(b []float32, op mpi.Op) error { return w.RingAllreduceCompressed(b, op, comp) }
		} else if w.Size() > 1 && w.LocalSize() == w.Size() {
			// Every rank on one host: the ring's data would move through
			// shared memory anyway (OpenMPI's vader), with a kernel copy.
			var s *mpi.Shm
			r.free = func() { s.Free() }
			r.share = func(n int) ([]float32, string, error) {
				var err error
				if s, err = w.NewShm(n); err != nil {
					return nil, "", err
				}
				return s.Region(), "shm (ranks on one host, through one shared segment)", nil
			}
			r.fn = func(b []float32, op mpi.Op) error {
				if s.Holds(b) { // an empty b too (Holds)
					// The segment spans the world: a rank's bucket of
					// another slice is every rank's error at once.
					err := s.AllreduceFloat32(b, op)
					if se := (*mpi.SliceError)(nil); errors.As(err, &se) {
						return &JobError{Err: err, Rank: se.Rank, Own: w.Rank() == se.Rank}
					}
					return err
				}
				return w.RingAllreduceFloat32(b, op)
			}
		}
	}
	if comp != mpi.None {
		r.name += ", " + comp.String() + " on the wire"
	}
	return r, nil
}
