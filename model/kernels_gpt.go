package model

/*
#include "kernels.h"
// k_xent_par writes its sums through pointers to Go locals; keep them on the
// stack (a training step allocates nothing).
#cgo noescape k_xent_par
#cgo nocallback k_xent_par
*/
import "C"

import "unsafe"

// The GPT's element-wise work in C (kernels_gpt.c), vectorised: in Go,
// the cross-entropy over GPT-2's 50257 logits per position alone took a
// third of the training step of the 6-layer, 384-wide model (math.Exp,
// one at a time). Each wrapper checks the lengths the C code relies on.

func i32(v []int32) *C.int32_t { return (*C.int32_t)(unsafe.Pointer(unsafe.SliceData(v))) }

// xent is SoftmaxCrossEntropy for wide rows (see Model.Loss): the loss
// summed over rows (not averaged), the rows whose first largest logit is
// the label, and, with d (which may be logits itself), the gradient of
// the loss times scale.
func xent(d, logits []float32, labels []int32, rows, classes int, scale float32) (loss float64, correct int) {
	need(rows*classes, logits)
	if d != nil {
		need(rows*classes, d)
	}
	if len(labels) < rows {
		panic("model: kernel buffer too short")
	}
	for _, y := range labels[:rows] {
		if y < 0 || int(y) >= classes {
			panic("model: label out of range")
		}
	}
	if rows == 0 {
		return 0, 0
	}
	var dp *C.float
	if d != nil {
		dp = f32(d)
	}
	var l C.double
	var c C.int64_t
	C.k_xent_par(dp, f32(logits), i32(labels), C.size_t(rows), C.size_t(classes), C.float(scale), &l, &c)
	return float64(l), int(c)
}

func gelu(y, x []float32, n int) {
	need(n, y, x)
	if n > 0 {
		C.k_gelu_par(f32(y), f32(x), C.size_t(n))
	}
}

func geluBackward(dx, dy, x []float32, n int) {
	need(n, dx, dy, x)
	if n > 0 {
		C.k_gelu_backward_par(f32(dx), f32(dy), f32(x), C.size_t(n))
	}
}

// lnSerial, when true, runs LayerNorm, the bias sums and the embedding's
// gradient on the calling thread alone, as before their passes
// (TestLayerNormParSameBits' reference).
var lnSerial = false

func layerNorm(y, mean, rstd, x, w, b []float32, rows, c int) {
	need(rows*c, y, x)
	need(rows, mean, rstd)
	need(c, w, b)
	if rows > 0 {
		if lnSerial {
			C.k_layernorm(f32(y), f32(mean), f32(rstd), f32(x), f32(w), f32(b), C.size_t(rows), C.size_t(c), C.float(lnEps))
			return
		}
		C.k_layernorm_par(f32(y), f32(mean), f32(rstd), f32(x), f32(w), f32(b), C.size_t(rows), C.size_t(c), C.float(lnEps))
	}
}

// layerNormBackward: dx (set, or added to when add; nil: none), dw and db
// added to.
func layerNormBackward(dx, dw, db, dy, x, w, mean, rstd []float32, rows, c int, add bool) {
	need(rows*c, dy, x)
	need(rows, mean, rstd)
	need(c, dw, db, w)
	var dxp *C.float
	if dx != nil {
		need(rows*c, dx)
		dxp = f32(dx)
	}
	if rows > 0 {
		if lnSerial {
			C.k_layernorm_backward(dxp, f32(dw), f32(db), f32(dy), f32(x), f32(w), f32(mean), f32(rstd), C.size_t(rows), C.size_t(c), cbool(add))
			return
		}
		C.k_layernorm_backward_par(dxp, f32(dw), f32(db), f32(dy), f32(x), f32(w), f32(mean), f32(rstd), C.size_t(rows), C.size_t(c), cbool(add))
	}
}

// attentionForward runs every sample's heads across the threads: p (n,
// heads, t, t) their probabilities, o (n, t, c) their outputs, from qkv
// (n, t, 3c).
func attentionForward(o, p, qkv []float32, n, t, c, heads int, scale float32) {
	need(n*t*3*c, qkv)
	need(n*t*c, o)
	need(n*heads*t*t, p)
	if n > 0 {
		C.k_attention_forward_par(f32(qkv), f32(o), f32(p), C.size_t(n), C.size_t(t), C.size_t(c), C.size_t(heads), C.float(scale))
	}
}

// attentionBackward sets dqkv (n, t, 3c) from the heads' output gradient
// dout (n, t, c), qkv and the probabilities p.
func attentionBackward(dqkv, dout, qkv, p []float32, n, t, c, heads int, scale float32) {
	need(n*t*3*c, qkv, dqkv)
	need(n*t*c, dout)
	need(n*heads*t*t, p)
	if n > 0 {
		C.k_attention_backward_par(f32(dqkv), f32(dout), f32(qkv), f32(p), C.size_t(n), C.size_t(t), C.size_t(c), C.size_t(heads), C.float(scale))
	}
}

// colSum adds the column sums of dy (rows, c) to db.
func colSum(db, dy []float32, rows, c int) {
	need(rows*c, dy)
	need(c, db)
	if rows > 0 {
		if lnSerial {
			C.k_colsum(f32(db), f32(dy), C.size_t(rows), C.size_t(c))
			return
		}
		C.k_colsum_par(f32(db), f32(dy), C.size_t(rows), C.size_t(c))
	}
}

// copyPar copies x into y (as long), across the rank's threads.
func copyPar(y, x []float32) {
	need(len(x), y)
	if len(x) > 0 {
		C.k_copy_par(f32(y), f32(x), C.size_t(len(x)))
	}
}

// fillRows sets each of y's rows rows of c values to b, across the
// rank's threads.
func fillRows(y, b []float32, rows, c int) {
	need(rows*c, y)
	need(c, b)
	if rows > 0 && c > 0 {
		C.k_fill_rows_par(f32(y), f32(b), C.size_t(rows), C.size_t(c))
	}
}

// addRows adds b (c values) onto each of y's rows rows of c values, across
// the rank's threads.
func addRows(y, b []float32, rows, c int) {
	need(rows*c, y)
	need(c, b)
	if rows > 0 && c > 0 {
		C.k_add_rows_par(f32(y), f32(b), C.size_t(rows), C.size_t(c))
	}
}

// add sets y = a + b over n values.
func add(y, a, b []float32, n int) {
	need(n, y, a, b)
	C.k_add_par(f32(y), f32(a), f32(b), C.size_t(n))
}

// embed sets y (rows, c) to the token rows of wte the ids name plus the
// position rows of wpe (row r at position r mod t). The ids are checked
// against the table here, as the C code indexes with them.
func embed(y, ids, wte, wpe []float32, rows, t, c int) {
	checkIDs(ids, rows, len(wte)/c)
	need(rows*c, y)
	need(t*c, wpe)
	if rows > 0 {
		C.k_embed_par(f32(y), f32(ids), f32(wte), f32(wpe), C.size_t(rows), C.size_t(t), C.size_t(c))
	}
}

// embedBackward adds dy's rows into dwte's and dwpe's rows the ids and
// positions name.
func embedBackward(dwte, dwpe, dy, ids []float32, rows, t, c int) {
	checkIDs(ids, rows, len(dwte)/c)
	need(rows*c, dy)
	need(t*c, dwpe)
	if rows > 0 {
		if lnSerial {
			C.k_embed_backward(f32(dwte), f32(dwpe), f32(dy), f32(ids), C.size_t(rows), C.size_t(t), C.size_t(c))
			return
		}
		C.k_embed_backward_par(f32(dwte), f32(dwpe), f32(dy), f32(ids), C.size_t(rows), C.size_t(t), C.size_t(c))
	}
}

func checkIDs(ids []float32, rows, vocab int) {
	need(rows, ids)
	for _, id := range ids[:rows] {
		if !(id >= 0 && int(id) < vocab) {
			panic("model: token id out of the embedding table")
		}
	}
}
