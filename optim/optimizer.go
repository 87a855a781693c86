package optim

/*
#include "adam.h"
*/
import "C"

import (
	"fmt"
	"math"
	"strings"
)

// Optimizer updates a flat parameter buffer from a flat gradient buffer.
// Its state buffers have the parameters' layout, so checkpoints store them
// tensor by tensor.
type Optimizer interface {
	// Step applies update number t (1-based: Adam's bias correction needs
	// it) at learning rate lr, and reports whether every gradient was
	// finite: when not, the parameters are spoilt and training must stop.
	// (The check rides on the update's own loop: g-g is 0 for a finite g
	// and NaN for NaN or Inf, so one add per element, no branch.) It
	// panics if the lengths differ.
	Step(params, grads []float32, lr float32, t int) (finite bool)
	// State names the state buffers, each as long as the parameters.
	State() map[string][]float32
}

// Config selects and configures an optimizer.
type Config struct {
	Name        string  `json:"name"` // sgd, adam, adamw
	Momentum    float64 `json:"momentum,omitempty"`
	Nesterov    bool    `json:"nesterov,omitempty"`
	WeightDecay float64 `json:"weight_decay"`
	Beta1       float64 `json:"beta1,omitempty"`
	Beta2       float64 `json:"beta2,omitempty"`
	Eps         float64 `json:"eps,omitempty"`
	// NoDecay are the parameters WeightDecay leaves alone (sorted,
	// disjoint): GPT-2's biases, LayerNorms and so on, as nanoGPT's second
	// parameter group. None: every parameter decays, torch.optim's
	// default.
	NoDecay []Span `json:"-"`
}

// Names lists the optimizers New knows.
var Names = []string{"sgd", "adam", "adamw"}

// StateFloats is how many float32s of state the optimizer c keeps per
// parameter (what New allocates): SGD's momentum buffer, Adam's two
// moments.
func StateFloats(c Config) int {
	switch {
	case c.Name == "adam" || c.Name == "adamw":
		return 2
	case c.Name == "sgd" && c.Momentum != 0:
		return 1
	}
	return 0
}

// New returns the optimizer c names, for n parameters.
func New(c Config, n int) (Optimizer, error) {
	segs, err := segments(c.NoDecay, n)
	if err != nil {
		return nil, err
	}
	switch c.Name {
	case "sgd":
		if c.Nesterov && c.Momentum == 0 {
			return nil, fmt.Errorf("--nesterov needs --momentum > 0")
		}
		s := NewSGD(n, float32(c.Momentum), float32(c.WeightDecay))
		s.Nesterov, s.runs = c.Nesterov, cRuns(segs)
		return s, nil
	case "adam", "adamw":
		if c.Beta1 < 0 || c.Beta1 >= 1 || c.Beta2 < 0 || c.Beta2 >= 1 || c.Eps <= 0 {
			return nil, fmt.Errorf("--beta1 %v --beta2 %v --eps %v: need betas in [0, 1) and eps > 0", c.Beta1, c.Beta2, c.Eps)
		}
		return &Adam{
			Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.Eps, WeightDecay: c.WeightDecay,
			Decoupled: c.Name == "adamw",
			M:         make([]float32, n), V: make([]float32, n), runs: cRuns(segs),
		}, nil
	}
	return nil, fmt.Errorf("unknown --optimizer %q: choose one of %s", c.Name, strings.Join(Names, ", "))
}

// Adam is torch.optim.Adam (Kingma and Ba 2015) with L2 weight decay added
// to the gradient, or with Decoupled torch.optim.AdamW (Loshchilov and
// Hutter 2019), which shrinks the parameters by lr*WeightDecay instead:
//
//	g = grad (+ wd*p for Adam);  p *= 1 - lr*wd (AdamW)
//	m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2
//	p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
//
// (amsgrad off, as PyTorch's default).
type Adam struct {
	Beta1, Beta2, Eps, WeightDecay float64
	Decoupled                      bool
	M, V                           []float32        // exp_avg, exp_avg_sq
	runs                           []C.struct_k_seg // runs with and without decay (update.c's); nil: all decay
}

// Step applies update t.
func (a *Adam) Step(params, grads []float32, lr float32, t int) bool {
	if len(params) != len(grads) || len(a.M) != len(params) {
		panic("optim: length mismatch")
	}
	if len(params) == 0 {
		return true
	}
	// 1-beta in float64, then rounded once, as PyTorch passes it: from a
	// float32 beta2 = 0.999 it would be off by 1e-5 relative.
	k := adamStep{b1: float32(a.Beta1), b2: float32(a.Beta2), c1: float32(1 - a.Beta1), c2: float32(1 - a.Beta2),
		step: lr / float32(1-math.Pow(a.Beta1, float64(t))),
		rbc2: float32(1 / math.Sqrt(1-math.Pow(a.Beta2, float64(t)))), eps: float32(a.Eps)}
	// The decaying runs' decay: decoupled, the parameter shrunk first;
	// else L2, added to the gradient. The other runs take neither.
	wd := float32(a.WeightDecay)
	shrink, l2 := float32(1), wd
	if a.Decoupled {
		shrink, l2 = 1-lr*wd, 0
	}
	runs, nruns := runsArg(a.runs)
	bad := C.k_adam_update(poolFn(), fp(params), fp(grads), fp(a.M), fp(a.V), C.size_t(len(params)), runs, nruns,
		C.float(k.b1), C.float(k.b2), C.float(k.c1), C.float(k.c2), C.float(k.step), C.float(k.rbc2), C.float(k.eps),
		C.float(shrink), C.float(l2))
	return bad == 0
}

// adamStep is one update's constants.
type adamStep struct{ b1, b2, c1, c2, step, rbc2, eps float32 }

// State is exp_avg and exp_avg_sq, PyTorch's names.
func (a *Adam) State() map[string][]float32 {
	return map[string][]float32{"exp_avg": a.M, "exp_avg_sq": a.V}
}

// ClipGradNorm scales grads so their L2 norm is at most maxNorm, as
// torch.nn.utils.clip_grad_norm_ does, and returns the norm before
// clipping. The sum of squares is in float64 (SumSquares); both it and
// the scaling run across the pool given to UsePool.
func ClipGradNorm(grads []float32, maxNorm float64) float64 {
	norm := math.Sqrt(sumSquares(grads))
	if c := ClipScale(norm, maxNorm); c < 1 {
		Scale(grads, float32(c))
	}
	return norm
}

// SumSquares is the sum of v's squares, in float64 (a part's share of a
// norm that is summed across ranks): each block of 64K values summed on
// its own and the blocks' sums added in order, so the same bits at any
// thread count.
func SumSquares(v []float32) float64 { return sumSquares(v) }

// Scale multiplies v by c in place (clipping's scale: each value's own
// float32 product, the same bits however it is cut).
func Scale(v []float32, c float32) { scale(v, c) }

// ClipScale is the factor clip_grad_norm_ scales gradients of L2 norm
// norm by, maxNorm / (norm + 1e-6); at 1 or more they are left alone.
// The GPU path computes the norm on the device and uses it too.
func ClipScale(norm, maxNorm float64) float64 { return maxNorm / (norm + 1e-6) }
