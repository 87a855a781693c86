package optim

/*
#include "adam.h"
*/
import "C"

import "sync"

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
	segs []segment // runs with and without decay; nil: all decay
	wg   sync.WaitGroup
	bads [maxThreads]float32 // each worker's sum of g-g
	up   sgdUpdate           // the update in progress, for the workers
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
	s.up = sgdUpdate{s: s, params: params, grads: grads, lr: lr}
	bad := applyPar(&s.up, len(params), &s.wg, s.bads[:]) // sum of g-g: 0 unless some g is NaN or Inf
	s.up = sgdUpdate{}                                    // holds no buffers past the call
	return bad == 0
}

// sgdUpdate is one Step's update, which any range of the parameters runs
// alone (par.go).
type sgdUpdate struct {
	s             *SGD
	params, grads []float32
	lr            float32
}

func (u *sgdUpdate) applyRange(lo, hi int) float32 {
	s := u.s
	var bad float32
	runsIn(s.segs, lo, hi, func(i, j int, decay bool) {
		wd := s.WeightDecay
		if !decay {
			wd = 0
		}
		var buf []float32
		if s.Buf != nil {
			buf = s.Buf[i:j]
		}
		bad += s.apply(u.params[i:j], u.grads[i:j], buf, u.lr, wd)
	})
	return bad
}

// apply updates one run of parameters at weight decay wd (sgd.c's
// loop) and returns the sum of g-g (0 unless some g is not finite).
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
