package optim

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
	Buf []float32
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
	wd, mu := s.WeightDecay, s.Momentum
	var bad float32 // sum of g-g: 0 unless some g is NaN or Inf
	if s.Buf == nil {
		for i, g := range grads {
			bad += g - g
			params[i] -= lr * (g + wd*params[i])
		}
		return bad == 0
	}
	buf := s.Buf[:len(params)]
	if s.Nesterov {
		for i, g := range grads {
			bad += g - g
			g += wd * params[i]
			b := mu*buf[i] + g
			buf[i] = b
			params[i] -= lr * (g + mu*b)
		}
		return bad == 0
	}
	for i, g := range grads {
		bad += g - g
		g += wd * params[i]
		b := mu*buf[i] + g
		buf[i] = b
		params[i] -= lr * b
	}
	return bad == 0
}

// State returns the optimizer's state buffers by name, each laid out like
// the parameters: what a checkpoint must keep for an exact resume.
func (s *SGD) State() map[string][]float32 {
	if s.Buf == nil {
		return nil
	}
	return map[string][]float32{"momentum_buffer": s.Buf}
}
