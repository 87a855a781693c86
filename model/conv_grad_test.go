package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"train/internal/near"
	"train/openblas"
)

// Finite-difference checks of the convolutional layers, with the same
// float32 argument as grad_test.go; checkLayer perturbs every input and
// parameter with fdEps = 1e-2 unless said otherwise.

func randParams(p *Params, seed uint64) {
	randn(rand.New(rand.NewPCG(seed, 1)), p.Data)
}

func TestConv2DGrad(t *testing.T) {
	for _, tc := range []struct {
		name               string
		inC, h, w, outC, k int
		stride, pad        int
		bias               bool
	}{
		{"3x3 pad 1", 2, 5, 4, 3, 3, 1, 1, true},
		{"3x3 stride 2", 3, 5, 5, 2, 3, 2, 1, false},
		{"5x5 pad 2", 1, 6, 6, 2, 5, 1, 2, true},
		{"1x1", 4, 3, 3, 2, 1, 1, 0, false},
		{"1x1 stride 2", 3, 5, 4, 2, 1, 2, 0, false},
	} {
		p := &Params{}
		c := NewConv2D(p, "c", tc.inC, tc.h, tc.w, tc.outC, tc.k, tc.stride, tc.pad, tc.bias)
		p.Alloc()
		randParams(p, 3)
		x := make([]float32, 2*c.InSize())
		randn(rand.New(rand.NewPCG(4, 5)), x)
		checkLayer(t, "Conv2D "+tc.name, c, p, x, 2)
	}
}

// TestConv2DForward checks one convolution against the definition, on
// PyTorch's NCHW indexing, to pin the NHWC layout and weight permutation.
func TestConv2DForward(t *testing.T) {
	p := &Params{}
	c := NewConv2D(p, "c", 2, 4, 3, 3, 3, 2, 1, true)
	p.Alloc()
	randParams(p, 7)
	const n = 2
	x := make([]float32, n*c.InSize()) // NHWC
	randn(rand.New(rand.NewPCG(8, 9)), x)
	y := make([]float32, n*c.OutSize())
	c.Forward(y, x, n)
	w, b := c.W.Of(p.Data), c.B.Of(p.Data)
	for bi := range n {
		for o := range 3 {
			for oh := range c.outH {
				for ow := range c.outW {
					s := float64(b[o])
					for ch := range 2 {
						for i := range 3 {
							for j := range 3 {
								ih, iw := oh*2-1+i, ow*2-1+j
								if ih < 0 || ih >= 4 || iw < 0 || iw >= 3 {
									continue
								}
								s += float64(w[((o*2+ch)*3+i)*3+j]) * float64(x[((bi*4+ih)*3+iw)*2+ch])
							}
						}
					}
					got := y[((bi*c.outH+oh)*c.outW+ow)*3+o]
					if !near.Close(s, float64(got), 0, 1e-5) {
						t.Fatalf("y[%d,%d,%d,%d] = %v, want %v", bi, oh, ow, o, got, s)
					}
				}
			}
		}
	}
}

func TestBatchNormGrad(t *testing.T) {
	p := &Params{}
	mode := &Mode{Training: true}
	l := NewBatchNorm2d(p, mode, "bn", 3, 2, 2)
	p.Alloc()
	randParams(p, 11)
	x := make([]float32, 4*l.InSize())
	randn(rand.New(rand.NewPCG(12, 13)), x)
	checkLayer(t, "BatchNorm2d", l, p, x, 4)
	checkLayer(t, "BatchNorm2d+ReLU", l.WithReLU(), p, x, 4)
}

// TestBatchNormStats checks training statistics, the running averages
// (unbiased variance) and evaluation mode against the definitions.
func TestBatchNormStats(t *testing.T) {
	p := &Params{}
	mode := &Mode{Training: true}
	l := NewBatchNorm2d(p, mode, "bn", 2, 1, 2)
	p.Alloc()
	l.init(nil)
	// Channel 0 values 1, 2, 3, 6; channel 1 all 5.
	x := []float32{1, 5, 2, 5, 3, 5, 6, 5}
	y := make([]float32, 8)
	l.Forward(y, x, 2)
	mean, vari := 3.0, (4+1+0+9)/4.0
	for i, v := range []float64{1, 2, 3, 6} {
		want := (v - mean) / math.Sqrt(vari+bnEps)
		if !near.Close(want, float64(y[2*i]), 0, 1e-6) || y[2*i+1] != 0 {
			t.Fatalf("y = %v", y)
		}
	}
	rm, rv := l.mean.Of(p.Buffers), l.vari.Of(p.Buffers)
	if !near.Close(0.3, float64(rm[0]), 0, 1e-6) || !near.Close(0.9+0.1*vari*4/3, float64(rv[0]), 0, 1e-6) || *p.Int64(l.batches) != 1 {
		t.Errorf("running mean %v var %v batches %d", rm, rv, *p.Int64(l.batches))
	}
	mode.Training = false
	l.Forward(y, x, 2)
	if want := (1 - 0.3) / math.Sqrt(float64(rv[0])+bnEps); !near.Close(want, float64(y[0]), 0, 1e-6) {
		t.Errorf("eval y[0] = %v, want %v", y[0], want)
	}
}

func TestPoolGrad(t *testing.T) {
	x := make([]float32, 2*4*4*3)
	randn(rand.New(rand.NewPCG(14, 15)), x)
	checkLayer(t, "MaxPool2d", NewMaxPool2d(3, 4, 4, 2), nil, x, 2)
	checkLayer(t, "AvgPool2d", NewAvgPool2d(3, 4, 4, 2), nil, x, 2)
	checkLayer(t, "GlobalAvgPool", NewGlobalAvgPool(3, 4, 4), nil, x, 2)
	checkLayer(t, "ToNHWC", NewToNHWC(3, 4, 4), nil, x, 2)
	checkLayer(t, "Flatten", NewFlatten(3, 4, 4), nil, x, 2)
	x5 := make([]float32, 2*5*5*3)
	randn(rand.New(rand.NewPCG(14, 16)), x5)
	checkLayer(t, "MaxPool2d(3, stride 2, pad 1)", NewMaxPool2dStride(3, 5, 5, 3, 2, 1), nil, x5, 2)
}

// TestMaxPoolPadding: torch.nn.MaxPool2d(3, 2, 1) of a 3x3 image of
// negative values, worked by hand: each output is the largest of the
// window's values inside the image (padding never wins), from (2, 2).
func TestMaxPoolPadding(t *testing.T) {
	l := NewMaxPool2dStride(1, 3, 3, 3, 2, 1)
	x := []float32{-1, -2, -3, -4, -5, -6, -7, -8, -9}
	y := make([]float32, l.OutSize())
	l.Forward(y, x, 1)
	if want := []float32{-1, -2, -4, -5}; !slices.Equal(y, want) {
		t.Errorf("got %v, want %v", y, want)
	}
	dx := make([]float32, 9)
	l.Backward(dx, []float32{1, 1, 1, 1}, x, y, 1)
	if want := []float32{1, 1, 0, 1, 1, 0, 0, 0, 0}; !slices.Equal(dx, want) {
		t.Errorf("dx %v, want %v", dx, want)
	}
}

func TestBottleneckGrad(t *testing.T) {
	for _, tc := range []struct {
		name               string
		inC, width, stride int
	}{{"identity", 8, 2, 1}, {"downsample", 3, 2, 2}} {
		p := &Params{}
		mode := &Mode{Training: true}
		b := NewBottleneck(p, mode, "blk", tc.inC, 4, 4, tc.width, tc.stride)
		p.Alloc()
		b.init(rand.New(rand.NewPCG(26, 27)))
		randomAffine(b.parts(), p, 28)
		x := make([]float32, 3*b.InSize())
		randn(rand.New(rand.NewPCG(30, 31)), x)
		// Three BatchNorms over 48 values a channel curve enough that the
		// default step's differences miss by 1% (they agree with the
		// analytic values at a quarter of it); torchvision's ResNet-50
		// checks the block's gradients in float64 (e2e).
		checkLayerEps(t, "Bottleneck "+tc.name, b, p, x, 3, fdEps/4)
	}
}

// TestFlattenOrder: Flatten of NHWC activations gives PyTorch's flatten of
// the NCHW tensor, and ToNHWC is its inverse.
func TestFlattenOrder(t *testing.T) {
	const c, h, w = 2, 2, 3
	nchw := make([]float32, c*h*w)
	for i := range nchw {
		nchw[i] = float32(i)
	}
	nhwc := make([]float32, len(nchw))
	NewToNHWC(c, h, w).Forward(nhwc, nchw, 1)
	if nhwc[1] != 6 || nhwc[2] != 1 { // (0,0,c=1) = nchw[1*6]; (0,1,c=0) = nchw[1]
		t.Errorf("NHWC = %v", nhwc)
	}
	flat := make([]float32, len(nchw))
	NewFlatten(c, h, w).Forward(flat, nhwc, 1)
	for i, v := range flat {
		if v != float32(i) {
			t.Fatalf("flatten = %v", flat)
		}
	}
}

func TestBasicBlockGrad(t *testing.T) {
	for _, tc := range []struct {
		name              string
		inC, outC, stride int
	}{{"identity", 3, 3, 1}, {"projection", 2, 4, 2}} {
		p := &Params{}
		mode := &Mode{Training: true}
		b := NewBasicBlock(p, mode, "blk", tc.inC, 4, 4, tc.outC, tc.stride)
		p.Alloc()
		b.init(rand.New(rand.NewPCG(16, 17)))
		randomAffine(b.parts(), p, 18)
		x := make([]float32, 3*b.InSize())
		randn(rand.New(rand.NewPCG(20, 21)), x)
		checkLayer(t, "BasicBlock "+tc.name, b, p, x, 3)
	}
}

// reluPattern fingerprints which ReLUs of m are active after a forward:
// model-level ReLU outputs and, inside each BasicBlock, its two ReLUs.
func reluPattern(m *Model, n int) string {
	var b []byte
	add := func(v []float32) {
		for _, x := range v {
			c := byte('0')
			if x > 0 {
				c = '1'
			}
			b = append(b, c)
		}
	}
	for i, l := range m.Layers {
		switch l := l.(type) {
		case *ReLU:
			add(m.acts[i+1][:n*l.OutSize()])
		case *BasicBlock:
			add(l.bc.out[:n*l.out]) // unfused: the test runs without Winograd
			add(m.acts[i+1][:n*l.out])
		case *BatchNorm2d:
			if l.relu {
				add(m.acts[i+1][:n*l.OutSize()])
			}
		}
	}
	return string(b)
}

// TestResNetGrad checks a whole ResNet-8 (one block per stage) with its
// loss: every BatchNorm and linear parameter and a sample of 300
// convolution weights.
//
// A network of ten thousand ReLUs is rough at any float32-usable step: a
// stem parameter moves every downstream ReLU, and a step of 1e-3 crosses
// several kinks, so difference quotients average the slopes of many pieces
// (seen: non-monotonic in the step, several percent off). So each
// parameter's step h is the largest of 1e-2, 3e-3, 1e-3 for which no ReLU
// changes state anywhere between -h and +h (checked on the sign pattern
// at the four points used); on that smooth piece the numeric value is
// Richardson's extrapolation (4 D(h/2) - D(h)) / 3, whose O(h^4) error
// leaves the curvature of the last stage's 16-value BatchNorms out of it.
// Parameters without a kink-free step are skipped; the test logs how many
// were checked and requires half of them. OpenBLAS does the products:
// the plain C loops (gemm_ref) took 82% of the test's 22 s, and
// TestPlainGemm holds them to their definition.
func TestResNetGrad(t *testing.T) {
	if _, err := openblas.Load("", 1); err != nil {
		t.Fatal(err)
	}
	m, err := Build(Config{Kind: "resnet", Depth: 8, Input: [3]int{2, 8, 8}, Classes: 3})
	if err != nil {
		t.Fatal(err)
	}
	m.Init(3)
	rng := rand.New(rand.NewPCG(22, 23))
	const n = 4
	x := make([]float32, n*2*8*8)
	randn(rng, x)
	labels := []int32{0, 2, 1, 2}
	lossAt := func() (float64, string) {
		l, _ := SoftmaxCrossEntropy(nil, m.Forward(x, n), labels, n, 3)
		return l, reluPattern(m, n)
	}
	clear(m.Params.Grad)
	logits := m.Forward(x, n)
	base := reluPattern(m, n)
	SoftmaxCrossEntropy(m.LossGrad(n), logits, labels, n, 3)
	m.Backward(n)
	var idx []int
	for _, t := range m.Params.Tensors {
		if len(t.Shape) == 4 {
			continue
		}
		for i := range t.Size {
			idx = append(idx, t.Offset+i)
		}
	}
	for range 300 {
		t := m.Params.Tensors[rng.IntN(len(m.Params.Tensors))]
		if len(t.Shape) == 4 {
			idx = append(idx, t.Offset+rng.IntN(t.Size))
		}
	}
	p := m.Params
	// diff is the central difference at step h, and whether every ReLU
	// kept its state at both ends.
	diff := func(i int, h float32) (float64, bool) {
		old := p.Data[i]
		p.Data[i] = old + h
		up, pu := lossAt()
		p.Data[i] = old - h
		down, pd := lossAt()
		p.Data[i] = old
		return (up - down) / (2 * float64(h)), pu == base && pd == base
	}
	bad, checked := 0, 0
	for _, i := range idx {
		for _, h := range []float32{1e-2, 3e-3, 1e-3} {
			d1, ok1 := diff(i, h)
			d2, ok2 := diff(i, h/2)
			if !ok1 || !ok2 {
				continue
			}
			checked++
			num := (4*d2 - d1) / 3
			if !near.Close(num, float64(p.Grad[i]), fdRel, 2e-4) {
				t.Errorf("param %d (step %g): analytic %v, numeric %v", i, h, p.Grad[i], num)
				if bad++; bad > 10 {
					t.Fatal("too many mismatches")
				}
			}
			break
		}
	}
	if checked*2 < len(idx) {
		t.Errorf("only %d of %d parameters had a kink-free step", checked, len(idx))
	}
	t.Logf("checked %d of %d sampled parameters (%d in the model) on kink-free steps", checked, len(idx), p.Len())
}

func TestReLUKernels(t *testing.T) {
	inf, negz := float32(math.Inf(1)), float32(math.Copysign(0, -1))
	for _, tc := range []struct{ d, y, want float32 }{
		{2, 1, 2}, {2, 0, 0}, {-3, 1e-38, -3}, {5, inf, 5}, {-1, 0, 0}, {4, negz, 0}, {4, -2, 0},
	} {
		// Lengths 1 and 37 take the vector loop and its scalar tail.
		for _, n := range []int{1, 37} {
			g, dy, y := make([]float32, n), make([]float32, n), make([]float32, n)
			for i := range n {
				dy[i], y[i] = tc.d, tc.y
			}
			reluMask(g, dy, y, n)
			if g[n-1] != tc.want || g[0] != tc.want {
				t.Errorf("reluMask(%v, %v) = %v, want %v (n %d)", tc.d, tc.y, g[n-1], tc.want, n)
			}
		}
	}
	// join with the identity map (mean 0, scale 1, beta 0) is max(a+b, 0).
	a, b, y := []float32{1, -2, 0, negz, 3}, []float32{-1, 1, negz, negz, inf}, make([]float32, 5)
	join(y, a, []float32{0}, []float32{1}, []float32{0}, b, nil, nil, nil, 5, 1)
	for i, want := range []float32{0, 0, 0, 0, inf} {
		if y[i] != want || math.Signbit(float64(y[i])) {
			t.Errorf("join at %d = %v, want %v (never -0)", i, y[i], want)
		}
	}
}

// TestJoin checks a residual block's end, max(bn(x) + z', 0) with z' the
// shortcut z or its own BatchNorm's map, against the definition in
// float64, on 16 channels (the vector loop) and 5 (its scalar tail).
func TestJoin(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, c := range []int{16, 5} {
		rows := 9
		v := func(n int) []float32 {
			s := make([]float32, n)
			randn(rng, s)
			return s
		}
		x, z, m, s, bt, zm, zs, zb := v(rows*c), v(rows*c), v(c), v(c), v(c), v(c), v(c), v(c)
		for _, proj := range []bool{false, true} {
			want, got := make([]float32, rows*c), make([]float32, rows*c)
			for i := range want {
				ch := i % c
				u := float64(z[i])
				if proj {
					u = (u-float64(zm[ch]))*float64(zs[ch]) + float64(zb[ch])
				}
				want[i] = float32(max((float64(x[i])-float64(m[ch]))*float64(s[ch])+float64(bt[ch])+u, 0))
			}
			if proj {
				join(got, x, m, s, bt, z, zm, zs, zb, rows, c)
			} else {
				join(got, x, m, s, bt, z, nil, nil, nil, rows, c)
			}
			if err := near.Check(want, got, 1e-6); err != nil {
				t.Errorf("%d channels, projection %v: %v", c, proj, err)
			}
		}
	}
}

// randomAffine draws a block's BatchNorm weights and biases (streams seed
// and seed+1, by offset), so that their gradients matter in the checks.
func randomAffine(parts []Layer, p *Params, seed uint64) {
	for _, l := range parts {
		if bn, ok := l.(*BatchNorm2d); ok {
			randn(rand.New(rand.NewPCG(seed, uint64(bn.W.Offset))), bn.W.Of(p.Data))
			randn(rand.New(rand.NewPCG(seed+1, uint64(bn.B.Offset))), bn.B.Of(p.Data))
		}
	}
}
