package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"train/internal/near"
)

// Finite-difference checks in float32. Central differences with eps = 1e-2
// on values of order 1: the truncation error is O(eps^2) = 1e-4 (zero for
// the linear layers), and float32 rounding of an objective of order 10
// contributes about 10 * 6e-8 / (2 * eps) = 3e-5. A tolerance of 2e-3
// absolute plus 1e-2 relative is far above both and far below the size of
// any real mistake (a wrong index or a missing term changes a gradient by
// order 1).
const (
	fdEps = 1e-2
	fdAbs = 2e-3
	fdRel = 1e-2
)

func randn(rng *rand.Rand, v []float32) {
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
}

// fdNear is a finite difference num close enough to the analytic ana.
func fdNear(num, ana float64) bool { return near.Close(ana, num, fdRel, fdAbs) }

// checkLayer compares a layer's analytic gradients (of its input and of
// every parameter in p) with central differences of L = sum(r * y).
func checkLayer(t *testing.T, name string, l Layer, p *Params, x []float32, n int) {
	t.Helper()
	checkLayerEps(t, name, l, p, x, n, fdEps)
}

// checkLayerEps is checkLayer with another step.
func checkLayerEps(t *testing.T, name string, l Layer, p *Params, x []float32, n int, eps float32) {
	t.Helper()
	checkGrads(t, name, l, p, x, n, eps, true)
}

// checkGrads is checkLayerEps; withX false leaves the input out (token
// ids have no gradient).
func checkGrads(t *testing.T, name string, l Layer, p *Params, x []float32, n int, eps float32, withX bool) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	r := make([]float32, n*l.OutSize())
	randn(rng, r)
	y := make([]float32, n*l.OutSize())
	objective := func() float64 {
		l.Forward(y, x, n)
		var s float64
		for i := range y {
			s += float64(r[i]) * float64(y[i])
		}
		return s
	}
	objective()
	dx := make([]float32, len(x))
	if p != nil {
		clear(p.Grad)
	}
	l.Backward(dx, r, x, y, n)

	// Central differences at eps and eps/2: where they disagree, a ReLU
	// kink (or a max-pool tie) lies within reach of the step and the
	// difference says nothing about the derivative; such points are
	// skipped, and must stay rare. Elsewhere both agree, and the analytic
	// value must match them.
	skipped, total := 0, 0
	check := func(what string, v []float32, ana []float32) {
		diff := func(i int, e float32) float64 {
			old := v[i]
			v[i] = old + e
			up := objective()
			v[i] = old - e
			down := objective()
			v[i] = old
			return (up - down) / (2 * float64(e))
		}
		for i := range v {
			total++
			num, half := diff(i, eps), diff(i, eps/2)
			if !fdNear(num, half) {
				skipped++
				continue
			}
			if !fdNear(num, float64(ana[i])) {
				t.Errorf("%s: d/d%s[%d]: analytic %.6g, numeric %.6g", name, what, i, ana[i], num)
			}
		}
	}
	if withX {
		check("x", x, dx)
	}
	if p != nil {
		check("params", p.Data, p.Grad)
	}
	if skipped*10 > total {
		t.Errorf("%s: %d of %d points near a kink: the check proves too little", name, skipped, total)
	}
}

func TestLinearGrad(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	p := &Params{}
	l := NewLinear(p, "fc", 5, 3)
	p.Alloc()
	randn(rng, p.Data)
	x := make([]float32, 4*5)
	randn(rng, x)
	checkLayer(t, "Linear", l, p, x, 4)
}

func TestReLUGrad(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	x := make([]float32, 3*7)
	for i := range x {
		// Keep away from the kink, where the derivative does not exist.
		v := 0.1 + rng.Float32()
		if i%2 == 0 {
			v = -v
		}
		x[i] = v
	}
	checkLayer(t, "ReLU", NewReLU(7), nil, x, 3)
}

func TestSoftmaxCrossEntropy(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const n, c = 5, 4
	logits := make([]float32, n*c)
	randn(rng, logits)
	labels := []int32{0, 3, 2, 2, 1}
	d := make([]float32, n*c)
	loss, _ := SoftmaxCrossEntropy(d, logits, labels, n, c)
	// The loss itself, from the definition.
	var want float64
	for i := range n {
		var z float64
		for j := range c {
			z += math.Exp(float64(logits[i*c+j]))
		}
		want += -math.Log(math.Exp(float64(logits[i*c+int(labels[i])])) / z)
	}
	want /= n
	if !near.Close(want, loss, 0, 1e-6) {
		t.Errorf("loss %v, want %v", loss, want)
	}
	for i := range logits {
		old := logits[i]
		logits[i] = old + fdEps
		up, _ := SoftmaxCrossEntropy(nil, logits, labels, n, c)
		logits[i] = old - fdEps
		down, _ := SoftmaxCrossEntropy(nil, logits, labels, n, c)
		logits[i] = old
		if num := (up - down) / (2 * fdEps); !fdNear(num, float64(d[i])) {
			t.Errorf("dlogits[%d]: analytic %v, numeric %v", i, d[i], num)
		}
	}
	// Large logits must not overflow.
	big := []float32{1000, -1000, 0}
	if l, c := SoftmaxCrossEntropy(make([]float32, 3), big, []int32{0}, 1, 3); l != 0 || c != 1 || math.IsNaN(l) {
		t.Errorf("large logits: loss %v correct %d", l, c)
	}
}

// TestMLPGrad checks a whole small MLP and its loss end to end.
func TestMLPGrad(t *testing.T) {
	m, err := Build(Config{Kind: "mlp", Hidden: []int{5, 4}, Input: [3]int{1, 2, 3}, Classes: 3})
	if err != nil {
		t.Fatal(err)
	}
	m.Init(11)
	rng := rand.New(rand.NewPCG(9, 10))
	const n = 4
	x := make([]float32, n*6)
	randn(rng, x)
	labels := []int32{0, 2, 1, 2}
	lossAt := func() float64 {
		l, _ := SoftmaxCrossEntropy(nil, m.Forward(x, n), labels, n, 3)
		return l
	}
	clear(m.Params.Grad)
	logits := m.Forward(x, n)
	SoftmaxCrossEntropy(m.LossGrad(n), logits, labels, n, 3)
	m.Backward(n)
	// A step of 1e-3, not fdEps: a hidden unit near zero crosses the ReLU
	// kink under a 1e-2 step (seen here). The loss is of order 1, so float32
	// rounding adds about 6e-8 / 2e-3 = 3e-5: the 2e-4 below still covers it.
	const eps = 1e-3
	p := m.Params
	for i := range p.Data {
		old := p.Data[i]
		p.Data[i] = old + eps
		up := lossAt()
		p.Data[i] = old - eps
		down := lossAt()
		p.Data[i] = old
		num := (up - down) / (2 * eps)
		if !near.Close(num, float64(p.Grad[i]), fdRel, 2e-4) {
			t.Errorf("param %d: analytic %v, numeric %v", i, p.Grad[i], num)
		}
	}
}

func TestMLPLayout(t *testing.T) {
	m, err := Build(Config{Kind: "mlp", Hidden: []int{256}, Input: [3]int{1, 28, 28}, Classes: 10})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name  string
		shape [2]int
	}{{"net.0.weight", [2]int{256, 784}}, {"net.0.bias", [2]int{256}}, {"net.2.weight", [2]int{10, 256}}, {"net.2.bias", [2]int{10}}}
	off := 0
	for i, w := range want {
		tt := m.Params.Tensors[i]
		size := w.shape[0]
		if w.shape[1] > 0 {
			size *= w.shape[1]
		}
		if tt.Name != w.name || tt.Shape[0] != w.shape[0] || tt.Offset != off || tt.Size != size {
			t.Errorf("tensor %d: %s %v @%d, want %s %v @%d", i, tt.Name, tt.Shape, tt.Offset, w.name, w.shape, off)
		}
		off += size
	}
	if m.Params.Len() != 784*256+256+2570 || len(m.Params.Grad) != m.Params.Len() {
		t.Errorf("params %d grads %d", m.Params.Len(), len(m.Params.Grad))
	}
	// Init is PyTorch's: every weight within 1/sqrt(fan_in), and not all zero.
	m.Init(1)
	w := m.Params.Tensors[0].Of(m.Params.Data)
	bound := float32(1 / math.Sqrt(784))
	var nonzero int
	for _, v := range w {
		if v < -bound || v > bound {
			t.Fatalf("weight %v outside +-%v", v, bound)
		}
		if v != 0 {
			nonzero++
		}
	}
	if nonzero < len(w)/2 {
		t.Errorf("only %d of %d weights nonzero", nonzero, len(w))
	}
	if _, err := Build(Config{Kind: "transformer", Input: [3]int{1, 1, 1}, Classes: 2}); err == nil || err.Error() != `unknown model "transformer": choose one of mlp, cnn, resnet, resnet-cifar, gpt` {
		t.Errorf("unknown kind: %v", err)
	}
}

// TestGradReadyOrder: Backward reports each finished layer's first
// parameter offset, from the last layer to the first, after that layer's
// gradients are written.
func TestGradReadyOrder(t *testing.T) {
	m, err := Build(Config{Kind: "mlp", Hidden: []int{5, 4}, Input: [3]int{1, 1, 6}, Classes: 3})
	if err != nil {
		t.Fatal(err)
	}
	m.Init(1)
	var got []int
	snap := map[int][]float32{}
	m.OnGradReady = func(lo int) {
		got = append(got, lo)
		snap[lo] = append([]float32(nil), m.Params.Grad[lo:]...)
	}
	x := []float32{1, -2, 3, 0.5, -1, 2, 0.3, 0.2, -0.1, 1, 1, 1}
	clear(m.Params.Grad)
	logits := m.Forward(x, 2)
	SoftmaxCrossEntropy(m.LossGrad(2), logits, []int32{0, 2}, 2, 3)
	m.Backward(2)
	// Layers: Linear(6,5) @0, ReLU, Linear(5,4) @35, ReLU, Linear(4,3) @59.
	want := []int{59, 35, 0}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("reported %v, want %v", got, want)
	}
	// What was reported final was final: nothing after changed it.
	for lo, v := range snap {
		if fmt.Sprint(v) != fmt.Sprint(m.Params.Grad[lo:]) {
			t.Errorf("gradients from %d changed after they were reported final", lo)
		}
	}
}
