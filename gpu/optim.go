package gpu

import (
	"fmt"
	"math"

	"train/optim"
)

// Optim runs a package optim optimizer's update on the device, with its
// state buffers (momentum, Adam's moments) in device memory under the same
// names; Download and Upload move them to and from the host optimizer
// for checkpoints and resumes.
type Optim struct {
	c     *Ctx
	host  optim.Optimizer
	state map[string]*Buf
	bad   *Buf
}

// NewOptim mirrors o (an *optim.SGD or *optim.Adam) on the device and
// uploads its state.
func NewOptim(c *Ctx, o optim.Optimizer) (*Optim, error) {
	switch o.(type) {
	case *optim.SGD, *optim.Adam:
	default:
		return nil, fmt.Errorf("gpu: no GPU update for optimizer %T", o)
	}
	g := &Optim{c: c, host: o, state: map[string]*Buf{}, bad: c.MustAlloc(1)}
	for name, v := range o.State() {
		b, err := c.Alloc(len(v))
		if err != nil {
			return nil, err
		}
		g.state[name] = b
	}
	return g, g.Upload()
}

// Upload copies the host optimizer's state to the device.
func (g *Optim) Upload() error {
	for name, v := range g.host.State() {
		if err := g.state[name].Upload(v); err != nil {
			return err
		}
	}
	return nil
}

// Download copies the device state into the host optimizer's buffers.
func (g *Optim) Download() error {
	for name, v := range g.host.State() {
		if err := g.state[name].Download(v); err != nil {
			return err
		}
	}
	return nil
}

// Step is the host optimizer's Step(params, grads, lr, t) on device
// buffers; it waits for the update and reports whether every gradient was
// finite.
func (g *Optim) Step(p, grad *Buf, lr float32, t int) (bool, error) {
	n := int64(p.Len())
	g.bad.Zero()
	switch o := g.host.(type) {
	case *optim.SGD:
		g.c.launch("sgd", n, p, grad, g.state["momentum_buffer"], lr, o.Momentum, o.WeightDecay, o.Nesterov, n, g.bad)
	case *optim.Adam:
		bc1 := 1 - math.Pow(o.Beta1, float64(t))
		bc2 := 1 - math.Pow(o.Beta2, float64(t))
		wd, shrink := float32(o.WeightDecay), float32(1)
		if o.Decoupled {
			shrink, wd = 1-lr*wd, 0
		}
		g.c.launch("adam", n, p, grad, g.state["exp_avg"], g.state["exp_avg_sq"],
			float32(o.Beta1), float32(o.Beta2), float32(1-o.Beta1), float32(1-o.Beta2),
			lr/float32(bc1), float32(1/math.Sqrt(bc2)), float32(o.Eps), wd, shrink, n, g.bad)
	}
	var bad [1]float32
	if err := g.bad.Download(bad[:]); err != nil {
		return false, err
	}
	return bad[0] == 0, nil
}

// SumSquares is the sum of squares of b in double (gradient clipping).
func (c *Ctx) SumSquares(b *Buf) (float64, error) {
	out := c.MustAlloc(2)
	defer out.Close()
	c.launch("sumsq", int64(b.Len()), out, b, int64(b.Len()))
	var v [1]float64
	err := out.download64(v[:])
	return v[0], err
}
