package optim

/*
#include "adam.h"
*/
import "C"

// SGD is stochastic gradient descent with momentum and L2 weight decay,
// exactly torch.optim.SGD with dampening 0:
//
//	g = grad + WeightDecay * param
//	buf = Momentum * buf + g          (buf = g on the first step)
//	param -= lr * buf                 (Nesterov: lr * (g + Momentum * buf))
//
// buf starts at zero, which makes its first update buf = g as in PyTorch.
type SGD struct {
	Momentum    float32
	WeightDecay float32
	Nesterov    bool
	// Buf is the momentum buffer, one value per parameter; nil until the
	// first Step when Momentum is zero.
	Buf  []float32
	runs []C.struct_k_seg // runs with and without decay (update.c's); nil: all decay
}

// NewSGD returns an SGD for n parameters.
func NewSGD(n int, momentum, weightDecay float32) *SGD {
	s := &SGD{Momentum: momentum, WeightDecay: weightDecay}
	if momentum != 0 {
		s.Buf = make([]float32, n)
	}
	return s
}

// Step applies one update to params from grads (same length) at rate lr;
// SGD does not need t. It panics if the lengths differ.
func (s *SGD) Step(params, grads []float32, lr float32, _ int) bool {
	if len(params) != len(grads) || (s.Buf != nil && len(s.Buf) != len(params)) {
		panic("optim: length mismatch")
	}
	if len(params) == 0 {
		return true
	}
	mode := 0
	var buf *C.float
	if s.Buf != nil {
		mode, buf = 1, fp(s.Buf)
		if s.Nesterov {
			mode = 2
		}
	}
	runs, nruns := runsArg(s.runs)
	bad := C.k_sgd_update(poolFn(), fp(params), fp(grads), buf, C.size_t(len(params)), runs, nruns, C.float(lr),
		C.float(s.WeightDecay), C.float(s.Momentum), C.int(mode)) // sum of g-g: 0 unless some g is NaN or Inf
	return bad == 0
}

// apply updates one run of parameters at weight decay wd (sgd.c's
// loop) and returns the sum of g-g (0 unless some g is not finite), for
// its tests (Step reaches it through update.c).
func (s *SGD) apply(params, grads, buf []float32, lr, wd float32) float32 {
	n := len(params)
	if len(grads) < n || (buf != nil && len(buf) < n) {
		panic("optim: length mismatch")
	}
	if n == 0 {
		return 0
	}
	mode := 0
	var b *C.float
	if buf != nil {
		mode, b = 1, fp(buf)
		if s.Nesterov {
			mode = 2
		}
	}
	return float32(C.k_sgd(fp(params), fp(grads), b, C.size_t(n), C.float(lr), C.float(wd), C.float(s.Momentum), C.int(mode)))
}

// State returns the optimizer's state buffers by name, each laid out like
// the parameters: what a checkpoint must keep for an exact resume.
func (s *SGD) State() map[string][]float32 {
	if s.Buf == nil {
		return nil
	}
	return map[string][]float32{"momentum_buffer": s.Buf}
}
