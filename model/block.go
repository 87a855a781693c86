package model

import "math/rand/v2"

// BasicBlock is the residual block of He et al. 2016 (CIFAR ResNets) with
// a projection shortcut where the shape changes:
//
//	out = relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))
//
// conv1 is 3x3 with the block's stride, conv2 3x3 stride 1, both without
// bias; shortcut is the identity, or a 1x1 convolution with the stride
// followed by BatchNorm (prefix.shortcut.0, prefix.shortcut.1, as in
// nn.Sequential) when the stride or the channel count changes. NHWC.
type BasicBlock struct {
	conv1, conv2, scConv *Conv2D
	bn1, bn2, scBN       *BatchNorm2d
	in, out              int // values per sample
	// Activations kept from Forward for Backward; the rest is the model's
	// scratch. relu(bn1(c1)) is bc's: the ReLU is fused into bn1, and bn1
	// into conv2's reading of c1 where conv2 runs Winograd's transforms.
	c1, c2, s1 []float32
	bc         bnConv // bn1 and conv2
	mode       *Mode
	batch      int
}

// NewBasicBlock builds a block from (h, w, inC) to (h/stride, w/stride,
// outC).
func NewBasicBlock(p *Params, mode *Mode, prefix string, inC, h, w, outC, stride int) *BasicBlock {
	return newBasicBlock(p, mode, prefix, inC, h, w, outC, stride, "shortcut")
}

// newBasicBlock is NewBasicBlock with the projection shortcut named sc
// ("shortcut" in the CIFAR ResNets, torchvision's "downsample").
func newBasicBlock(p *Params, mode *Mode, prefix string, inC, h, w, outC, stride int, sc string) *BasicBlock {
	b := &BasicBlock{mode: mode}
	b.conv1 = NewConv2D(p, prefix+".conv1", inC, h, w, outC, 3, stride, 1, false)
	oh, ow := b.conv1.outH, b.conv1.outW
	b.bn1 = NewBatchNorm2d(p, mode, prefix+".bn1", outC, oh, ow).WithReLU()
	b.conv2 = NewConv2D(p, prefix+".conv2", outC, oh, ow, outC, 3, 1, 1, false)
	b.bn2 = NewBatchNorm2d(p, mode, prefix+".bn2", outC, oh, ow)
	b.bc = bnConv{bn: b.bn1, conv: b.conv2}
	b.conv1.statsTo, b.conv2.statsTo = b.bn1, b.bn2
	b.bn1.from, b.bn2.from = b.conv1, b.conv2
	if stride != 1 || inC != outC {
		b.scConv = NewConv2D(p, prefix+"."+sc+".0", inC, h, w, outC, 1, stride, 0, false)
		b.scBN = NewBatchNorm2d(p, mode, prefix+"."+sc+".1", outC, oh, ow)
	}
	b.in, b.out = h*w*inC, oh*ow*outC
	return b
}

func (b *BasicBlock) InSize() int  { return b.in }
func (b *BasicBlock) OutSize() int { return b.out }

func (b *BasicBlock) parts() []Layer {
	ls := []Layer{b.conv1, b.bn1, b.conv2, b.bn2}
	if b.scConv != nil {
		ls = append(ls, b.scConv, b.scBN)
	}
	return ls
}

func (b *BasicBlock) ensure(n int) {
	if n <= b.batch {
		return
	}
	b.batch = n
	o := n * b.out
	b.c1, b.c2 = make([]float32, o), make([]float32, o)
	if b.scConv != nil {
		b.s1 = make([]float32, o)
	}
}

// Forward: y (n, out) from x (n, in).
func (b *BasicBlock) Forward(y, x []float32, n int) {
	b.ensure(n)
	b.conv1.Forward(b.c1, x, n)
	b.bc.Forward(b.c2, b.c1, n)
	if b.scConv != nil {
		b.scConv.Forward(b.s1, x, n)
		b.bn2.Join(y, b.c2, b.scBN, b.s1, n)
		return
	}
	b.bn2.Join(y, b.c2, nil, x, n)
}

// addShortcutInto, when false, sums an identity shortcut's gradient in a
// pass of its own (TestShortcutAddedInto's reference).
var addShortcutInto = true

// Backward through both branches; dx is the sum of their input gradients.
func (b *BasicBlock) Backward(dx, dy, x, y []float32, n int) {
	o := n * b.out
	s := &b.mode.scratch
	// With the identity shortcut, g is its input gradient: it can be
	// dx from the start, and conv1 add its own to it (inputGradAdder).
	addInto := addShortcutInto && b.scConv == nil && dx != nil && b.conv1.addsInputGrad()
	g := dx // gradient of the sum before the last ReLU
	if !addInto {
		g = s.get(slotGrad, o)
	}
	t1, t2 := s.get(slotT1, o), s.get(slotT2, o)
	reluMask(g, dy, y, o)
	// Residual branch, last layer first.
	b.bn2.Backward(t1, g, b.c2, nil, n)  // t1 = d c2 (no ReLU: no output needed)
	b.bc.convBackward(t2, t1, b.c1, n)   // t2 = d relu(bn1(c1))
	b.bn1.Backward(t1, t2, b.c1, nil, n) // t1 = d c1 (ReLU mask inside)
	if addInto {
		b.conv1.backwardAdd(dx, t1, x, n) // dx = g + conv1's input gradient
		return
	}
	// Shortcut (t2 is free again: its scratch).
	var dxs []float32
	if b.scConv != nil {
		dxs = s.get(slotShortDx, n*b.in)
	}
	shortcutBackward(dx, x, g, t1, b.c1, b.conv1, b.scConv, b.scBN, b.s1, t2, dxs, n, b.in, b.out)
}

func (b *BasicBlock) init(rng *rand.Rand)        { initAll(b.parts(), rng) }
func (b *BasicBlock) flops() (fwd, dw, dx int64) { return flopsOf(b.parts()) }

// initAll draws a block's layers' parameters, in order.
func initAll(ls []Layer, rng *rand.Rand) {
	for _, l := range ls {
		l.(initializer).init(rng)
	}
}

// flopsOf sums a block's layers' matrix-multiply work.
func flopsOf(ls []Layer) (fwd, dw, dx int64) {
	for _, l := range ls {
		if f, ok := l.(flopCounter); ok {
			a, c, d := f.flops()
			fwd, dw, dx = fwd+a, dw+c, dx+d
		}
	}
	return fwd, dw, dx
}

// shortcutBackward ends a residual block's backward: g is the gradient
// of the sum (after the last ReLU's mask), t the gradient at the
// branch's first convolution's output (conv1's dy). With a projection
// (scConv, scBN over s1; sg and dxs scratch) both paths'
// input gradients are summed into dx; without, dx is conv1's plus g.
// dx nil: the weight gradients only.
func shortcutBackward(dx, x, g, t, c1 []float32, conv1, scConv *Conv2D, scBN *BatchNorm2d, s1, sg, dxs []float32, n, in, out int) {
	if scConv != nil {
		scBN.Backward(sg, g, s1, nil, n) // sg = d s1 (no ReLU: no output needed)
		if dx == nil {
			scConv.Backward(nil, sg, x, s1, n)
			conv1.Backward(nil, t, x, c1, n)
			return
		}
		scConv.Backward(dxs, sg, x, s1, n)
		conv1.Backward(dx, t, x, c1, n)
		add(dx, dx, dxs, n*in)
		return
	}
	conv1.Backward(dx, t, x, c1, n)
	if dx != nil {
		add(dx, dx, g, n*out)
	}
}
