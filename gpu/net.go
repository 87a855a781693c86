package gpu

import (
	"fmt"
	"unsafe"

	"train/model"
)

// Net runs a model.Model on the GPU: the same layers (built from
// model.Specs), the same flat parameter, gradient and buffer layouts (so
// checkpoints, broadcasts and the replica check work on host copies made
// by Download), activations NCHW in device memory. The host Model keeps
// the configuration, the Mode (training or evaluation, BatchNorm's
// cross-rank Reduce) and the host copy of the buffers.
type Net struct {
	ctx     *Ctx
	m       *model.Model
	P, G, B *Buf // parameters, gradients, buffers (BatchNorm's running statistics)
	layers  []glayer
	specs   []model.Spec
	acts    []*Buf // acts[i] is layer i's input; acts[len] the logits
	grads   []*Buf
	batch   int
	labels  *Buf // int32
	out     *Buf // two doubles: loss sum, correct count
	// OnGradReady is Model.OnGradReady for the GPU: called after each
	// layer with parameters, with the offset from which gradients are
	// final (the work is queued; callers order on the stream).
	OnGradReady func(lo int)
	paramLo     []int
	gpt         *gptScratch // the GPT blocks' shared gradient scratch
}

// glayer is one layer on the GPU: Forward(y, x, n) and Backward(dx, dy,
// x, y, n) with dx nil when the input's gradient is not needed, as
// model.Layer, on device buffers.
type glayer interface {
	forward(y, x *Buf, n int)
	backward(dx, dy, x, y *Buf, n int)
}

// NewNet builds the GPU version of m and uploads its parameters and
// buffers.
func NewNet(ctx *Ctx, m *model.Model) (*Net, error) {
	p := m.Params
	n := &Net{ctx: ctx, m: m, specs: m.Specs()}
	var err error
	if n.P, err = ctx.Alloc(len(p.Data)); err != nil {
		return nil, err
	}
	if n.G, err = ctx.Alloc(len(p.Grad)); err != nil {
		return nil, err
	}
	if n.B, err = ctx.Alloc(len(p.Buffers)); err != nil {
		return nil, err
	}
	n.out = ctx.MustAlloc(4)
	for _, s := range n.specs {
		l, err := n.build(s)
		if err != nil {
			return nil, err
		}
		n.layers = append(n.layers, l)
		lo := -1 // no parameters of its own; the head's gradient is the embedding's, final only after the embedding's backward
		switch {
		case s.Kind == "block" || s.Kind == "gpt":
			lo = s.Parts[0].W.Offset
		case s.Kind != "head" && s.W.Size > 0:
			lo = s.W.Offset
		}
		n.paramLo = append(n.paramLo, lo)
	}
	if err := n.Upload(); err != nil {
		return nil, err
	}
	return n, ctx.Err()
}

func (n *Net) build(s model.Spec) (glayer, error) {
	if l, ok, err := n.gptLayer(s); ok {
		return l, err
	}
	c := n.ctx
	switch s.Kind {
	case "linear":
		return &linear{c: c, s: s, w: n.P.Slice(s.W.Offset, s.W.Size), b: n.P.Slice(s.B.Offset, s.B.Size),
			dw: n.G.Slice(s.W.Offset, s.W.Size), db: n.G.Slice(s.B.Offset, s.B.Size)}, nil
	case "relu":
		return &relu{c: c, size: s.In}, nil
	case "conv":
		return n.conv(s), nil
	case "bn":
		return n.bn(s), nil
	case "maxpool":
		if s.Stride != s.KH || s.Pad != 0 {
			return nil, fmt.Errorf("gpu: no GPU max pooling with stride %d and padding %d yet (torchvision ResNets' stem): use --device cpu", s.Stride, s.Pad)
		}
		return &maxpool{c: c, s: s}, nil
	case "avgpool":
		return &avgpool{c: c, s: s}, nil
	case "nhwc", "flatten":
		return nil, nil // identity on NCHW activations
	case "block":
		b := &block{c: c, s: s, conv1: n.conv(s.Parts[0]), bn1: n.bn(s.Parts[1]), conv2: n.conv(s.Parts[2]), bn2: n.bn(s.Parts[3])}
		if len(s.Parts) == 6 {
			b.scConv, b.scBN = n.conv(s.Parts[4]), n.bn(s.Parts[5])
		}
		return b, nil
	}
	return nil, fmt.Errorf("gpu: no GPU layer for %q", s.Kind)
}

// Upload copies the host model's parameters and buffers to the device.
func (n *Net) Upload() error {
	p := n.m.Params
	if err := n.P.Upload(p.Data); err != nil {
		return err
	}
	return n.B.Upload(p.Buffers)
}

// Download copies the device's parameters and buffers to the host model.
func (n *Net) Download() error {
	p := n.m.Params
	if err := n.P.Download(p.Data); err != nil {
		return err
	}
	return n.B.Download(p.Buffers)
}

func (n *Net) ensure(b int) error {
	if b <= n.batch {
		return nil
	}
	for _, s := range n.specs {
		if int64(b)*int64(max(s.In, s.Out)) >= 1<<31 {
			return fmt.Errorf("gpu: batch %d: a layer's activations exceed 2^31 values (the kernels index with int32); lower --batch-size", b)
		}
	}
	n.ctx.Sync()
	for _, a := range append(n.acts, n.grads...) {
		if a != nil {
			a.Close()
		}
	}
	n.batch = b
	L := len(n.layers)
	n.acts, n.grads = make([]*Buf, L+1), make([]*Buf, L+1)
	n.acts[0] = n.ctx.MustAlloc(b * n.specs[0].In)
	for i := range L {
		if n.layers[i] == nil { // identity: the output is the input
			n.acts[i+1] = n.acts[i]
			continue
		}
		n.acts[i+1] = n.ctx.MustAlloc(b * n.specs[i].Out)
	}
	for i := L; i >= 1; i-- {
		if i < L && n.layers[i] == nil {
			n.grads[i] = n.grads[i+1]
			continue
		}
		if i == L && n.m.Positions() > 1 {
			// gpt: the logits are the largest buffer, and the loss's
			// gradient overwrites them (model.Model.LossGrad does the same).
			n.grads[i] = n.acts[i]
			continue
		}
		n.grads[i] = n.ctx.MustAlloc(b * n.specs[i-1].Out)
	}
	if n.labels != nil {
		n.labels.Close()
	}
	n.labels = n.ctx.MustAlloc(b * n.m.Positions())
	return n.ctx.Err()
}

// Forward runs the network on x (b samples, NCHW) and leaves the logits
// on the device.
func (n *Net) Forward(x []float32, b int) error {
	if err := n.ensure(b); err != nil {
		return err
	}
	if err := n.acts[0].Upload(x[:b*n.specs[0].In]); err != nil {
		return err
	}
	for i, l := range n.layers {
		switch {
		case l == nil:
		case n.specs[i].Kind == "block": // times its parts
			l.forward(n.acts[i+1], n.acts[i], b)
		default:
			n.ctx.timed(n.specs[i].Kind+" fwd", func() { l.forward(n.acts[i+1], n.acts[i], b) })
		}
	}
	return n.ctx.Err()
}

// Logits copies the last Forward's logits (b x positions x classes) to
// dst.
func (n *Net) Logits(dst []float32, b int) error {
	return n.acts[len(n.layers)].Download(dst[:b*n.m.Positions()*n.m.Classes()])
}

// Loss is the model's loss on the device for the last Forward: the mean
// softmax cross-entropy over its b samples' rows (one per sample, or the
// context's positions for gpt) and the rows whose first largest logit is
// the label; with grad, the gradient of the mean loss in place for
// Backward. labels has a label per row. It waits for the GPU.
func (n *Net) Loss(labels []int32, b int, grad bool) (float64, int, error) {
	rows := b * n.m.Positions()
	if err := n.labels.UploadBytes(unsafe.Pointer(&labels[0]), 4*rows); err != nil {
		return 0, 0, err
	}
	n.out.Zero()
	var d *Buf
	if grad {
		d = n.grads[len(n.layers)]
	}
	n.xent(d, rows)
	return n.LossResult(b)
}

// ForwardLabeled is Forward with the batch's labels uploaded first, for
// QueueLoss: both copies are made before any kernel is queued, so neither
// waits for the GPU.
func (n *Net) ForwardLabeled(x []float32, labels []int32, b int) error {
	if err := n.ensure(b); err != nil {
		return err
	}
	if err := n.labels.UploadBytes(unsafe.Pointer(&labels[0]), 4*b*n.m.Positions()); err != nil {
		return err
	}
	return n.Forward(x, b)
}

// QueueLoss queues the loss of the last ForwardLabeled and its gradient
// for Backward without waiting: the host goes on queueing backward while
// the GPU finishes forward. LossResult reads the loss later.
func (n *Net) QueueLoss(b int) {
	rows := b * n.m.Positions()
	n.out.Zero()
	n.xent(n.grads[len(n.layers)], rows)
}

// xent queues the loss of rows rows (and its gradient into d unless nil):
// one block per row, as the kernel expects.
func (n *Net) xent(d *Buf, rows int) {
	n.ctx.launchGrid("xent", uint(min(rows, 1<<20)), 1, 256, d, n.out, n.acts[len(n.layers)], n.labels, rows, n.m.Classes())
}

// LossResult waits for the queued work and returns the mean loss and the
// correct count of the last loss computed.
func (n *Net) LossResult(b int) (float64, int, error) {
	var v [2]float64
	if err := n.out.download64(v[:]); err != nil {
		return 0, 0, err
	}
	return v[0] / float64(b*n.m.Positions()), int(v[1]), nil
}

// Positions is the rows of logits a sample gives (the model's).
func (n *Net) Positions() int { return n.m.Positions() }

// LossGrad is the device buffer Backward reads the logits' gradient from.
func (n *Net) LossGrad() *Buf { return n.grads[len(n.layers)] }

// Backward queues the backward pass of the last Forward, adding into G.
func (n *Net) Backward(b int) error {
	first := 0 // the first layer that computes anything: layers before it need no input gradient
	for first < len(n.layers) && n.layers[first] == nil {
		first++
	}
	for i := len(n.layers) - 1; i >= 0; i-- {
		l := n.layers[i]
		if l == nil {
			continue
		}
		var dx *Buf
		if i > first {
			dx = n.grads[i]
		}
		if n.specs[i].Kind == "block" {
			l.backward(dx, n.grads[i+1], n.acts[i], n.acts[i+1], b)
		} else {
			n.ctx.timed(n.specs[i].Kind+" bwd", func() { l.backward(dx, n.grads[i+1], n.acts[i], n.acts[i+1], b) })
		}
		if n.OnGradReady != nil && n.paramLo[i] >= 0 {
			n.OnGradReady(n.paramLo[i])
		}
	}
	return n.ctx.Err()
}

// Act returns a copy of the activation at layer boundary i (0 is the
// input, len(Specs) the logits) for b samples, NCHW: the conformance
// tests compare it with the CPU path's.
func (n *Net) Act(i, b int) ([]float32, error) {
	v := make([]float32, b*n.boundary(i))
	return v, n.acts[i].Download(v)
}

// ActGrad is Act for the gradient of the loss at boundary i (i >= 1).
func (n *Net) ActGrad(i, b int) ([]float32, error) {
	v := make([]float32, b*n.boundary(i))
	return v, n.grads[i].Download(v)
}

func (n *Net) boundary(i int) int {
	if i == 0 {
		return n.specs[0].In
	}
	return n.specs[i-1].Out
}

// ---- layers ----

type linear struct {
	c            *Ctx
	s            model.Spec
	w, b, dw, db *Buf
}

func (l *linear) forward(y, x *Buf, n int) {
	in, out := l.s.In, l.s.Out
	l.c.gemm(false, true, n, out, in, 1, x, in, l.w, in, 0, y, out)
	l.c.launch("bias_rows", int64(n*out), y, l.b, n, out)
}

func (l *linear) backward(dx, dy, x, _ *Buf, n int) {
	in, out := l.s.In, l.s.Out
	l.c.gemm(true, false, out, in, n, 1, dy, out, x, in, 1, l.dw, in)
	l.c.sumRows(l.db, dy, n, out)
	if dx != nil {
		l.c.gemm(false, false, n, in, out, 1, dy, out, l.w, in, 0, dx, in)
	}
}

type relu struct {
	c    *Ctx
	size int
}

func (r *relu) forward(y, x *Buf, n int) {
	r.c.launch("relu_fwd", int64(n*r.size), y, x, int64(n*r.size))
}

func (r *relu) backward(dx, dy, _, y *Buf, n int) {
	if dx != nil {
		r.c.launch("relu_bwd", int64(n*r.size), dx, dy, y, int64(n*r.size))
	}
}

// chanGrid is the grid of a per-channel reduction over rows values of
// each of C channels: blocks enough for the GPU, a channel per grid row.
func chanGrid(rows int) uint { return uint(min(max(rows/4096, 1), 64)) }

type maxpool struct {
	c   *Ctx
	s   model.Spec
	arg *Buf
}

func (l *maxpool) forward(y, x *Buf, n int) {
	if l.arg == nil || l.arg.Len() < n*l.s.Out {
		if l.arg != nil {
			l.c.Sync()
			l.arg.Close()
		}
		l.arg = l.c.MustAlloc(n * l.s.Out)
	}
	l.c.launch("maxpool_fwd", int64(n*l.s.Out), y, l.arg, x, n*l.s.InC, l.s.InH, l.s.InW, l.s.KH)
}

func (l *maxpool) backward(dx, dy, _, _ *Buf, n int) {
	if dx == nil {
		return
	}
	dx.Slice(0, n*l.s.In).Zero()
	l.c.launch("maxpool_bwd", int64(n*l.s.Out), dx, dy, l.arg, n*l.s.InC, l.s.InH, l.s.InW, l.s.KH)
}

type avgpool struct {
	c *Ctx
	s model.Spec
}

func (l *avgpool) forward(y, x *Buf, n int) {
	l.c.launch("avgpool_fwd", int64(n*l.s.Out), y, x, n*l.s.InC, l.s.InH, l.s.InW, l.s.KH, l.s.KW)
}

func (l *avgpool) backward(dx, dy, _, _ *Buf, n int) {
	if dx != nil {
		l.c.launch("avgpool_bwd", int64(n*l.s.In), dx, dy, n*l.s.InC, l.s.InH, l.s.InW, l.s.KH, l.s.KW)
	}
}

type block struct {
	c                    *Ctx
	s                    model.Spec
	conv1, conv2, scConv *conv
	bn1, bn2, scBN       *bn
	c1, b1, c2, b2       *Buf
	s1, s2, g, t1, t2    *Buf
	dxs                  *Buf
	batch                int
}

func (b *block) ensure(n int) {
	if n <= b.batch {
		return
	}
	b.c.Sync()
	closeAll(b.c1, b.b1, b.c2, b.b2, b.s1, b.s2, b.g, b.t1, b.t2, b.dxs)
	b.batch = n
	o := n * b.s.Out
	b.c1, b.b1, b.c2, b.b2 = b.c.MustAlloc(o), b.c.MustAlloc(o), b.c.MustAlloc(o), b.c.MustAlloc(o)
	b.g, b.t1, b.t2 = b.c.MustAlloc(o), b.c.MustAlloc(o), b.c.MustAlloc(o)
	if b.scConv != nil {
		b.s1, b.s2, b.dxs = b.c.MustAlloc(o), b.c.MustAlloc(o), b.c.MustAlloc(n*b.s.In)
	}
}

// forward: y = relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)), as model.BasicBlock.
func (b *block) forward(y, x *Buf, n int) {
	b.ensure(n)
	o := n * b.s.Out
	t := b.c.timed
	t("conv fwd", func() { b.conv1.forward(b.c1, x, n) })
	t("bn fwd", func() { b.bn1.forward(b.b1, b.c1, n) })
	t("conv fwd", func() { b.conv2.forward(b.c2, b.b1, n) })
	t("bn fwd", func() { b.bn2.forward(b.b2, b.c2, n) })
	short := x
	if b.scConv != nil {
		t("conv fwd", func() { b.scConv.forward(b.s1, x, n) })
		t("bn fwd", func() { b.scBN.forward(b.s2, b.s1, n) })
		short = b.s2
	}
	t("add_relu fwd", func() { b.c.launch("add_relu", int64(o), y, b.b2, short, int64(o)) })
}

func (b *block) backward(dx, dy, x, y *Buf, n int) {
	o := n * b.s.Out
	t := b.c.timed
	t("add_relu bwd", func() { b.c.launch("relu_bwd", int64(o), b.g, dy, y, int64(o)) })
	t("bn bwd", func() { b.bn2.backward(b.t1, b.g, b.c2, b.b2, n) })
	t("conv bwd", func() { b.conv2.backward(b.t2, b.t1, b.b1, b.c2, n) })
	t("bn bwd", func() { b.bn1.backward(b.t1, b.t2, b.c1, b.b1, n) })
	if b.scConv != nil {
		t("bn bwd", func() { b.scBN.backward(b.t2, b.g, b.s1, b.s2, n) })
		if dx == nil {
			t("conv bwd", func() { b.scConv.backward(nil, b.t2, x, b.s1, n) })
			t("conv bwd", func() { b.conv1.backward(nil, b.t1, x, b.c1, n) })
			return
		}
		t("conv bwd", func() { b.scConv.backward(b.dxs, b.t2, x, b.s1, n) })
		t("conv bwd", func() { b.conv1.backward(dx, b.t1, x, b.c1, n) })
		t("add_relu bwd", func() { dx.Slice(0, n*b.s.In).AddFrom(b.dxs.Slice(0, n*b.s.In)) })
		return
	}
	t("conv bwd", func() { b.conv1.backward(dx, b.t1, x, b.c1, n) })
	if dx != nil {
		t("add_relu bwd", func() { dx.Slice(0, o).AddFrom(b.g.Slice(0, o)) })
	}
}
