package gpu

// #include "shim.h"
import "C"

import (
	"fmt"
	"unsafe"

	"train/model"
)

// conv is model.Conv2D on the GPU: cuDNN's convolution on NCHW with the
// weight in PyTorch's (outC, inC, k, k) layout, so the flat parameter
// buffer is used as is. cuDNN's descriptors include the batch size, so a
// plan (descriptors and the fastest algorithms cuDNN measured) is made
// per batch size seen, at its first use.
type conv struct {
	c            *Ctx
	s            model.Spec
	w, b, dw, db *Buf
	plans        map[int]unsafe.Pointer
	wsBytes      int
}

func (n *Net) conv(s model.Spec) *conv {
	c := &conv{c: n.ctx, s: s, w: n.P.Slice(s.W.Offset, s.W.Size), dw: n.G.Slice(s.W.Offset, s.W.Size), plans: map[int]unsafe.Pointer{}}
	if s.HasBias {
		c.b, c.db = n.P.Slice(s.B.Offset, s.B.Size), n.G.Slice(s.B.Offset, s.B.Size)
	}
	return c
}

func (l *conv) plan(n int) unsafe.Pointer {
	if p, ok := l.plans[n]; ok {
		return p
	}
	s := l.s
	var p unsafe.Pointer
	var ws C.size_t
	tensorOps := cbool(l.c.Precision != "fp32")
	if r := C.cudnn_conv_new(l.c.dnn, &p, C.int(n), C.int(s.InC), C.int(s.InH), C.int(s.InW), C.int(s.OutC), C.int(s.K), C.int(s.Stride), C.int(s.Pad), tensorOps, cbool(l.c.Deterministic), &ws); r != 0 {
		l.c.fail(fmt.Errorf("cuDNN convolution %dx%dx%dx%d -> %d channels, %dx%d kernel: %s", n, s.InC, s.InH, s.InW, s.OutC, s.K, s.K, C.GoString(C.cudnn_error_string(r))))
		return nil
	}
	l.plans[n] = p
	l.wsBytes = max(l.wsBytes, int(ws))
	return p
}

func (l *conv) forward(y, x *Buf, n int) {
	p := l.plan(n)
	if p == nil {
		return
	}
	ws := l.c.workspace(l.wsBytes)
	if r := C.cudnn_conv_forward(l.c.dnn, p, x.ptr, l.w.ptr, y.ptr, ws.ptr, C.size_t(4*ws.n)); r != 0 {
		l.c.fail(fmt.Errorf("cudnnConvolutionForward: %s", C.GoString(C.cudnn_error_string(r))))
	}
	if l.b != nil {
		hw := l.s.OutH * l.s.OutW
		l.c.launch("bias_chan", int64(n*l.s.Out), y, l.b, n, l.s.OutC, hw)
	}
}

func (l *conv) backward(dx, dy, x, _ *Buf, n int) {
	p := l.plan(n)
	if p == nil {
		return
	}
	if l.db != nil {
		hw := l.s.OutH * l.s.OutW
		l.c.launchGrid("bias_chan_grad", chanGrid(n*hw), uint(l.s.OutC), 256, l.db, dy, n, l.s.OutC, hw)
	}
	ws := l.c.workspace(l.wsBytes)
	var dxp C.dptr
	if dx != nil {
		dxp = dx.ptr
	}
	if r := C.cudnn_conv_backward(l.c.dnn, p, x.ptr, l.w.ptr, dy.ptr, dxp, l.dw.ptr, ws.ptr, C.size_t(4*ws.n)); r != 0 {
		l.c.fail(fmt.Errorf("cudnnConvolutionBackward: %s", C.GoString(C.cudnn_error_string(r))))
	}
}
