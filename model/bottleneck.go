package model

import "math/rand/v2"

// Bottleneck is the residual block of torchvision's ResNet-50, -101 and
// -152 (ResNet v1.5: the stride on the 3x3 convolution, as torchvision
// places it):
//
//	out = relu(bn3(conv3(relu(bn2(conv2(relu(bn1(conv1(x)))))))) + downsample(x))
//
// conv1 is 1x1 from inC to width, conv2 3x3 with the block's stride,
// conv3 1x1 to 4 x width, all without bias; downsample is the identity,
// or a 1x1 convolution with the stride and BatchNorm (prefix.downsample.0,
// prefix.downsample.1, torchvision's names) when the shape changes. NHWC.
type Bottleneck struct {
	conv1, conv2, conv3, scConv *Conv2D
	bn1, bn2, bn3, scBN         *BatchNorm2d
	in, mid1, mid2, out         int // values per sample: input, after conv1, after conv2, output
	// Activations kept from Forward for Backward (b2 with its ReLU fused
	// into the BatchNorm, and relu(bn1(c1)) bc's: see bnConv); the rest is
	// the model's scratch.
	c1, c2, b2, c3, s1 []float32
	bc                 bnConv // bn1 and conv2
	mode               *Mode
	batch              int
}

// Expansion is the Bottleneck's output channels per width.
const Expansion = 4

// NewBottleneck builds a block from (h, w, inC) to (h/stride, w/stride,
// 4 width).
func NewBottleneck(p *Params, mode *Mode, prefix string, inC, h, w, width, stride int) *Bottleneck {
	b := &Bottleneck{mode: mode}
	out := Expansion * width
	b.conv1 = NewConv2D(p, prefix+".conv1", inC, h, w, width, 1, 1, 0, false)
	b.bn1 = NewBatchNorm2d(p, mode, prefix+".bn1", width, h, w).WithReLU()
	b.conv2 = NewConv2D(p, prefix+".conv2", width, h, w, width, 3, stride, 1, false)
	oh, ow := b.conv2.outH, b.conv2.outW
	b.bn2 = NewBatchNorm2d(p, mode, prefix+".bn2", width, oh, ow).WithReLU()
	b.bc = bnConv{bn: b.bn1, conv: b.conv2}
	b.conv3 = NewConv2D(p, prefix+".conv3", width, oh, ow, out, 1, 1, 0, false)
	b.bn3 = NewBatchNorm2d(p, mode, prefix+".bn3", out, oh, ow)
	if stride != 1 || inC != out {
		b.scConv = NewConv2D(p, prefix+".downsample.0", inC, h, w, out, 1, stride, 0, false)
		b.scBN = NewBatchNorm2d(p, mode, prefix+".downsample.1", out, oh, ow)
	}
	b.in, b.mid1, b.mid2, b.out = h*w*inC, h*w*width, oh*ow*width, oh*ow*out
	return b
}

func (b *Bottleneck) InSize() int  { return b.in }
func (b *Bottleneck) OutSize() int { return b.out }

func (b *Bottleneck) parts() []Layer {
	ls := []Layer{b.conv1, b.bn1, b.conv2, b.bn2, b.conv3, b.bn3}
	if b.scConv != nil {
		ls = append(ls, b.scConv, b.scBN)
	}
	return ls
}

func (b *Bottleneck) ensure(n int) {
	if n <= b.batch {
		return
	}
	b.batch = n
	b.c1 = make([]float32, n*b.mid1)
	b.c2, b.b2 = make([]float32, n*b.mid2), make([]float32, n*b.mid2)
	b.c3 = make([]float32, n*b.out)
	if b.scConv != nil {
		b.s1 = make([]float32, n*b.out)
	}
}

// Forward: y (n, out) from x (n, in).
func (b *Bottleneck) Forward(y, x []float32, n int) {
	b.ensure(n)
	b.conv1.Forward(b.c1, x, n)
	b.bc.Forward(b.c2, b.c1, n)
	b.bn2.Forward(b.b2, b.c2, n)
	b.conv3.Forward(b.c3, b.b2, n)
	if b.scConv != nil {
		b.scConv.Forward(b.s1, x, n)
		b.bn3.Join(y, b.c3, b.scBN, b.s1, n)
		return
	}
	b.bn3.Join(y, b.c3, nil, x, n)
}

// Backward through both branches; dx is the sum of their input gradients.
func (b *Bottleneck) Backward(dx, dy, x, y []float32, n int) {
	o := n * b.out
	s := &b.mode.scratch
	g := s.get(slotGrad, o) // gradient of the sum before the last ReLU
	t3, u2, t2 := s.get(slotT1, o), s.get(slotT2, n*b.mid2), s.get(slotT3, n*b.mid2)
	u1, t1 := s.get(slotT4, n*b.mid1), s.get(slotT5, n*b.mid1)
	reluMask(g, dy, y, o)
	b.bn3.Backward(t3, g, b.c3, nil, n)     // t3 = d c3 (no ReLU: no output needed)
	b.conv3.Backward(u2, t3, b.b2, b.c3, n) // u2 = d b2
	b.bn2.Backward(t2, u2, b.c2, b.b2, n)   // t2 = d c2 (ReLU mask inside)
	b.bc.convBackward(u1, t2, b.c1, n)      // u1 = d relu(bn1(c1))
	b.bn1.Backward(t1, u1, b.c1, nil, n)    // t1 = d c1 (ReLU mask inside)
	var sg, dxs []float32
	if b.scConv != nil {
		sg, dxs = s.get(slotShortG, o), s.get(slotShortDx, n*b.in)
	}
	shortcutBackward(dx, x, g, t1, b.c1, b.conv1, b.scConv, b.scBN, b.s1, sg, dxs, n, b.in, b.out)
}

func (b *Bottleneck) init(rng *rand.Rand)        { initAll(b.parts(), rng) }
func (b *Bottleneck) flops() (fwd, dw, dx int64) { return flopsOf(b.parts()) }

func (b *Bottleneck) heldBytes() int {
	return floats(b.c1, b.c2, b.b2, b.c3, b.s1) + b.bc.heldBytes()
}

// spec is a "bottleneck" (the GPU path has no such layer yet, and says so).
func (b *Bottleneck) spec() Spec {
	s := Spec{Kind: "bottleneck", In: b.in, Out: b.out}
	for _, p := range b.parts() {
		s.Parts = append(s.Parts, p.(specer).spec())
	}
	return s
}
