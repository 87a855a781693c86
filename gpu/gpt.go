package gpu

import (
	"fmt"
	"math"

	"train/model"
)

// The GPT on the GPU (model/gpt.go's layers): the same flat parameter
// and gradient layouts, activations as rows of C values as on the CPU.
// The linear maps are cuBLAS products; the embedding, LayerNorm, GELU and
// the causal attention are kernels of kernels/gpt.cu. The attention keeps
// no probabilities: one row's log-sum-exp, and backward recomputes them
// (the flash-attention manner), so its memory is O(n H T), not O(n H T^2).

// gptScratch is the gradient scratch the blocks' backward passes share:
// they run one at a time.
type gptScratch struct {
	batch                   int
	d1, d2, do, dqkv, dh    *Buf
	dg, attnD               *Buf
	rows, c, f, heads, tLen int
}

func (s *gptScratch) ensure(c *Ctx, n int) {
	if n <= s.batch {
		return
	}
	c.Sync()
	closeAll(s.d1, s.d2, s.do, s.dqkv, s.dh, s.dg, s.attnD)
	s.batch = n
	r := n * s.tLen
	s.d1, s.d2, s.do = c.MustAlloc(r*s.c), c.MustAlloc(r*s.c), c.MustAlloc(r*s.c)
	s.dqkv, s.dh, s.dg = c.MustAlloc(3*r*s.c), c.MustAlloc(r*s.f), c.MustAlloc(r*s.f)
	s.attnD = c.MustAlloc(n * s.heads * s.tLen)
}

// gptLayer builds the GPU layer of a GPT spec (nil, false for the other
// kinds).
func (n *Net) gptLayer(s model.Spec) (glayer, bool, error) {
	switch s.Kind {
	case "embedding":
		return &embedding{c: n.ctx, s: s, wte: n.param(s.W), wpe: n.param(s.B), dwte: n.grad(s.W), dwpe: n.grad(s.B)}, true, nil
	case "layernorm":
		return n.layerNorm(s), true, nil
	case "head":
		return &head{c: n.ctx, s: s, wte: n.param(s.W), dwte: n.grad(s.W)}, true, nil
	case "gpt":
		if s.Shards > 1 {
			return nil, true, fmt.Errorf("gpu: no tensor parallelism on the GPU yet (--tensor-parallel): use --device cpu")
		}
		hd := s.Width / s.Heads
		if hd > 128 {
			return nil, true, fmt.Errorf("gpu: heads of %d dimensions (the attention kernel takes up to 128): use more --heads", hd)
		}
		if n.gpt == nil {
			n.gpt = &gptScratch{c: s.Width, f: s.Parts[4].OutWidth, heads: s.Heads, tLen: s.T}
		}
		b := &gptBlock{c: n.ctx, s: s, sc: n.gpt, ln1: n.layerNorm(s.Parts[0]), attn: n.conv1d(s.Parts[1]), proj: n.conv1d(s.Parts[2]),
			ln2: n.layerNorm(s.Parts[3]), fc: n.conv1d(s.Parts[4]), mlp: n.conv1d(s.Parts[5]), hd: hd,
			scale: float32(1 / math.Sqrt(float64(hd)))}
		return b, true, nil
	}
	return nil, false, nil
}

func (n *Net) param(t model.Tensor) *Buf { return n.P.Slice(t.Offset, t.Size) }
func (n *Net) grad(t model.Tensor) *Buf  { return n.G.Slice(t.Offset, t.Size) }

// embedding: y = wte[ids] + wpe; ids arrive as float32, as on the CPU.
type embedding struct {
	c                    *Ctx
	s                    model.Spec
	wte, wpe, dwte, dwpe *Buf
}

func (e *embedding) forward(y, x *Buf, n int) {
	rows := n * e.s.T
	e.c.launch("embed_fwd", int64(rows*e.s.Width), y, x, e.wte, e.wpe, rows, e.s.T, e.s.Width)
}

func (e *embedding) backward(_, dy, x, _ *Buf, n int) {
	rows := n * e.s.T
	e.c.launch("embed_bwd_pos", int64(e.s.T*e.s.Width), e.dwpe, dy, n, e.s.T, e.s.Width)
	e.c.launch("embed_bwd_tok", int64(rows*e.s.Width), e.dwte, dy, x, rows, e.s.Width)
}

// layerNorm keeps each row's mean and 1/std of the last forward, and the
// parameter gradients' partial sums.
type layerNorm struct {
	c                *Ctx
	s                model.Spec
	w, b, dw, db     *Buf
	mean, rstd, part *Buf
	batch, chunks    int
}

func (n *Net) layerNorm(s model.Spec) *layerNorm {
	return &layerNorm{c: n.ctx, s: s, w: n.param(s.W), b: n.param(s.B), dw: n.grad(s.W), db: n.grad(s.B)}
}

// lnRowsPerBlock: ln_fwd and ln_bwd_dx run a warp per row, 8 per block.
const lnRowsPerBlock = 8

func (l *layerNorm) ensure(n int) {
	if n <= l.batch {
		return
	}
	l.c.Sync()
	closeAll(l.mean, l.rstd, l.part)
	rows := n * l.s.T
	l.batch = n
	l.chunks = min(max(rows/256, 1), 64)
	l.mean, l.rstd, l.part = l.c.MustAlloc(rows), l.c.MustAlloc(rows), l.c.MustAlloc(2*l.chunks*l.s.Width)
}

func (l *layerNorm) forward(y, x *Buf, n int) {
	l.ensure(n)
	rows := n * l.s.T
	l.c.launchGrid("ln_fwd", uint((rows+lnRowsPerBlock-1)/lnRowsPerBlock), 1, 32*lnRowsPerBlock, y, l.mean, l.rstd, x, l.w, l.b, rows, l.s.Width)
}

func (l *layerNorm) backward(dx, dy, x, _ *Buf, n int) { l.backwardAdd(dx, dy, x, n, false) }

// backwardAdd writes dx, or adds to it with add; the parameter gradients
// are summed by chunks of rows, then the chunks in order.
func (l *layerNorm) backwardAdd(dx, dy, x *Buf, n int, add bool) {
	rows, C := n*l.s.T, l.s.Width
	if dx != nil {
		l.c.launchGrid("ln_bwd_dx", uint((rows+lnRowsPerBlock-1)/lnRowsPerBlock), 1, 32*lnRowsPerBlock, dx, dy, x, l.w, l.mean, l.rstd, rows, C, add)
	}
	per := (rows + l.chunks - 1) / l.chunks
	l.c.launchGrid("ln_param_part", uint((C+31)/32), uint(l.chunks), 256, l.part, dy, x, l.mean, l.rstd, rows, C, per)
	l.c.launch("ln_param_sum", int64(C), l.dw, l.db, l.part, l.chunks, C)
}

// conv1d is Hugging Face's Conv1D: y = x W + b with W stored (in, out).
type conv1d struct {
	c            *Ctx
	s            model.Spec
	w, b, dw, db *Buf
}

func (n *Net) conv1d(s model.Spec) *conv1d {
	return &conv1d{c: n.ctx, s: s, w: n.param(s.W), b: n.param(s.B), dw: n.grad(s.W), db: n.grad(s.B)}
}

func (l *conv1d) forward(y, x *Buf, n int) {
	rows, in, out := n*l.s.T, l.s.Width, l.s.OutWidth
	l.c.gemm(false, false, rows, out, in, 1, x, in, l.w, out, 0, y, out)
	l.c.launch("bias_rows", int64(rows*out), y, l.b, rows, out)
}

func (l *conv1d) backward(dx, dy, x, _ *Buf, n int) {
	rows, in, out := n*l.s.T, l.s.Width, l.s.OutWidth
	l.c.gemm(true, false, in, out, rows, 1, x, in, dy, out, 1, l.dw, out)
	l.c.sumRows(l.db, dy, rows, out)
	if dx != nil {
		l.c.gemm(false, true, rows, in, out, 1, dy, out, l.w, out, 0, dx, in)
	}
}

// head: logits = x wte[:vocab]^T, the table tied to the embedding's.
type head struct {
	c         *Ctx
	s         model.Spec
	wte, dwte *Buf
}

func (h *head) forward(y, x *Buf, n int) {
	rows, C, V := n*h.s.T, h.s.Width, h.s.Vocab
	h.c.gemm(false, true, rows, V, C, 1, x, C, h.wte, C, 0, y, V)
}

func (h *head) backward(dx, dy, x, _ *Buf, n int) {
	rows, C, V := n*h.s.T, h.s.Width, h.s.Vocab
	h.c.gemm(true, false, V, C, rows, 1, dy, V, x, C, 1, h.dwte, C)
	if dx != nil {
		h.c.gemm(false, false, rows, C, V, 1, dy, V, h.wte, C, 0, dx, C)
	}
}

// gptBlock is model.GPTBlock: x1 = x + attn(ln_1(x)); y = x1 +
// mlp(ln_2(x1)). It keeps its forward activations for the largest batch
// seen; the gradients' scratch is the Net's, shared.
type gptBlock struct {
	c                   *Ctx
	s                   model.Spec
	sc                  *gptScratch
	ln1, ln2            *layerNorm
	attn, proj, fc, mlp *conv1d // c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj
	hd                  int
	scale               float32
	a1, qkv, o, lse, at *Buf
	x1, a2, hid, g      *Buf
	batch               int
}

func (b *gptBlock) ensure(n int) {
	b.sc.ensure(b.c, n)
	if n <= b.batch {
		return
	}
	b.c.Sync()
	closeAll(b.a1, b.qkv, b.o, b.lse, b.at, b.x1, b.a2, b.hid, b.g)
	b.batch = n
	rows, C, f := n*b.s.T, b.s.Width, b.s.Parts[4].OutWidth
	b.a1, b.qkv, b.o = b.c.MustAlloc(rows*C), b.c.MustAlloc(3*rows*C), b.c.MustAlloc(rows*C)
	b.lse, b.at, b.x1, b.a2 = b.c.MustAlloc(n*b.s.Heads*b.s.T), b.c.MustAlloc(rows*C), b.c.MustAlloc(rows*C), b.c.MustAlloc(rows*C)
	b.hid, b.g = b.c.MustAlloc(rows*f), b.c.MustAlloc(rows*f)
}

func (b *gptBlock) forward(y, x *Buf, n int) {
	b.ensure(n)
	rows, C, f := n*b.s.T, b.s.Width, b.s.Parts[4].OutWidth
	t := b.c.timed
	t("layernorm fwd", func() { b.ln1.forward(b.a1, x, n) })
	t("linear fwd", func() { b.attn.forward(b.qkv, b.a1, n) })
	t("attention fwd", func() { b.attention("attn_fwd", "flash_fwd", n, b.o, b.lse, b.qkv, b.s.T, C, b.s.Heads, b.hd, b.scale) })
	t("linear fwd", func() { b.proj.forward(b.at, b.o, n) })
	t("residual", func() { b.c.launch("add2", int64(rows*C), b.x1, x, b.at, int64(rows*C)) })
	t("layernorm fwd", func() { b.ln2.forward(b.a2, b.x1, n) })
	t("linear fwd", func() { b.fc.forward(b.hid, b.a2, n) })
	t("gelu fwd", func() { b.c.launch("gelu_fwd", int64(rows*f), b.g, b.hid, int64(rows*f)) })
	t("linear fwd", func() { b.mlp.forward(y, b.g, n) })
	t("residual", func() { y.Slice(0, rows*C).AddFrom(b.x1.Slice(0, rows*C)) })
}

// attention launches one of the attention kernels for n samples: the
// tiled one (flash.cu) for heads of up to 64 dimensions, a block per 64
// rows of a (sample, head); otherwise the warp-per-row one (gpt.cu).
func (b *gptBlock) attention(perRow, tiled string, n int, args ...any) {
	if b.hd > flashTile {
		b.c.launchGrid(perRow, uint(n*b.s.T), uint(b.s.Heads), 32, args...)
		return
	}
	tiles := (b.s.T + flashTile - 1) / flashTile
	b.c.launchShared(b.c.stream, tiled, uint(tiles), uint(n*b.s.Heads), 256, uint(flashShared[tiled]), args...)
}

// backward as model.GPTBlock's: the residual paths carry dy through, each
// branch adds its own.
func (b *gptBlock) backward(dx, dy, x, _ *Buf, n int) {
	rows, C, f := n*b.s.T, b.s.Width, b.s.Parts[4].OutWidth
	s := b.sc
	t := b.c.timed
	t("linear bwd", func() { b.mlp.backward(s.dg, dy, b.g, nil, n) })
	t("gelu bwd", func() { b.c.launch("gelu_bwd", int64(rows*f), s.dh, s.dg, b.hid, int64(rows*f)) })
	t("linear bwd", func() { b.fc.backward(s.d2, s.dh, b.a2, nil, n) })
	s.d1.Slice(0, rows*C).CopyFrom(dy.Slice(0, rows*C))
	t("layernorm bwd", func() { b.ln2.backwardAdd(s.d1, s.d2, b.x1, n, true) })
	t("linear bwd", func() { b.proj.backward(s.do, s.d1, b.o, nil, n) })
	t("attention bwd", func() {
		b.attention("attn_bwd_q", "flash_bwd_q", n, s.dqkv, s.attnD, b.qkv, b.o, s.do, b.lse, b.s.T, C, b.s.Heads, b.hd, b.scale)
		b.attention("attn_bwd_kv", "flash_bwd_kv", n, s.dqkv, s.attnD, b.qkv, s.do, b.lse, b.s.T, C, b.s.Heads, b.hd, b.scale)
	})
	t("linear bwd", func() { b.attn.backward(s.d2, s.dqkv, b.a1, nil, n) })
	if dx == nil {
		t("layernorm bwd", func() { b.ln1.backwardAdd(nil, s.d2, x, n, false) })
		return
	}
	dx.Slice(0, rows*C).CopyFrom(s.d1.Slice(0, rows*C))
	t("layernorm bwd", func() { b.ln1.backwardAdd(dx, s.d2, x, n, true) })
}
