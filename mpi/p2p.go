package mpi

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"

	"train/flightrec"
)

// Small point-to-point messages, for the watchdog that reports stalled
// ranks: they travel beside the collectives, on a World of their own (Dup).

// SendInt64 sends buf to rank dest with tag. Messages this small go
// eagerly: the call returns once the data is copied out, whether or not
// dest is receiving.
func (w *World) SendInt64(buf []int64, dest, tag int) error {
	var p unsafe.Pointer
	if len(buf) > 0 {
		p = unsafe.Pointer(&buf[0])
	}
	traffic.sent.Add(8 * int64(len(buf)))
	id := w.fl.BeginMsg("send", "", dest, tag, 8*int64(len(buf)), "int64")
	err := errorf(C.tr_send(w.comm, p, C.int(len(buf)), cI64, C.int(dest), C.int(tag)), w.rank, "MPI_Send")
	w.fl.End(id, err)
	return err
}

// SendFloat32 sends buf to rank dest with tag, waiting until MPI has taken
// it (for large messages: until dest receives).
func (w *World) SendFloat32(buf []float32, dest, tag int) error {
	if len(buf) > maxCount {
		return fmt.Errorf("rank %d: MPI_Send(float32): %d elements, more than one message holds", w.rank, len(buf))
	}
	var p unsafe.Pointer
	if len(buf) > 0 {
		p = unsafe.Pointer(&buf[0])
	}
	traffic.sent.Add(4 * int64(len(buf)))
	id := w.fl.BeginMsg("send", "", dest, tag, 4*int64(len(buf)), "float32")
	err := errorf(C.tr_send(w.comm, p, C.int(len(buf)), cF32, C.int(dest), C.int(tag)), w.rank, "MPI_Send(float32)")
	w.fl.End(id, err)
	return err
}

// RecvFloat32 receives len(buf) float32 values from rank source with tag.
func (w *World) RecvFloat32(buf []float32, source, tag int) error {
	if len(buf) > maxCount {
		return fmt.Errorf("rank %d: MPI_Recv(float32): %d elements, more than one message holds", w.rank, len(buf))
	}
	var p unsafe.Pointer
	if len(buf) > 0 {
		p = unsafe.Pointer(&buf[0])
	}
	traffic.recv.Add(4 * int64(len(buf)))
	id := w.fl.BeginMsg("recv", "", source, tag, 4*int64(len(buf)), "float32")
	err := errorf(C.tr_recv(w.comm, p, C.int(len(buf)), cF32, C.int(source), C.int(tag)), w.rank, "MPI_Recv(float32)")
	w.fl.End(id, err)
	return err
}

// Probe reports whether a message with tag has arrived from any rank, and
// from which, without waiting.
func (w *World) Probe(tag int) (source int, ok bool, err error) {
	return w.ProbeFrom(-1, tag)
}

// ProbeFrom is Probe for a message from rank from (any rank if from < 0).
// With it a thread can wait for a message without spinning inside MPI,
// which a thread sharing its core with another cannot afford (colocated
// parameter servers).
func (w *World) ProbeFrom(from, tag int) (source int, ok bool, err error) {
	var flag, src C.int
	if err := errorf(C.tr_iprobe(w.comm, C.int(from), C.int(tag), &flag, &src), w.rank, "MPI_Iprobe"); err != nil {
		return 0, false, err
	}
	return int(src), flag != 0, nil
}

// WaitAny waits for a message with tag from any rank and says from which
// (MPI_Probe): the asynchronous parameter servers serve workers in the
// order their messages arrive.
func (w *World) WaitAny(tag int) (source int, err error) {
	var src C.int
	id := w.fl.BeginMsg("probe", "", flightrec.Any, tag, 0, "")
	err = errorf(C.tr_probe(w.comm, C.int(tag), &src), w.rank, "MPI_Probe")
	w.fl.End(id, err)
	if err != nil {
		return 0, err
	}
	return int(src), nil
}

// PollFrom waits for a message with tag from rank from (any rank if
// from < 0) by probing without blocking, calling idle(i) between the
// i-th probe and the next (a thread that shares its core yields there),
// and says from which rank it came. The flight recorder sees one wait,
// not every probe.
func (w *World) PollFrom(from, tag int, idle func(i int)) (int, error) {
	peer := from
	if from < 0 {
		peer = flightrec.Any
	}
	id := w.fl.BeginMsg("probe", "", peer, tag, 0, "")
	for i := 0; ; i++ {
		src, ok, err := w.ProbeFrom(from, tag)
		if err != nil || ok {
			w.fl.End(id, err)
			return src, err
		}
		idle(i)
	}
}

// RecvInt64 receives len(buf) int64 values from rank source with tag,
// waiting for them.
func (w *World) RecvInt64(buf []int64, source, tag int) error {
	var p unsafe.Pointer
	if len(buf) > 0 {
		p = unsafe.Pointer(&buf[0])
	}
	traffic.recv.Add(8 * int64(len(buf)))
	id := w.fl.BeginMsg("recv", "", source, tag, 8*int64(len(buf)), "int64")
	err := errorf(C.tr_recv(w.comm, p, C.int(len(buf)), cI64, C.int(source), C.int(tag)), w.rank, "MPI_Recv")
	w.fl.End(id, err)
	return err
}

// SendrecvBytes sends send to rank dest and receives len(recv) bytes from
// rank source in one call (MPI_Sendrecv), so a ring of ranks can shift
// without deadlock. The buffers may be C memory (the GPU ring's pinned
// host buffers); they must not move during the call.
func (w *World) SendrecvBytes(send []byte, dest int, recv []byte, source, tag int) error {
	if len(send) > maxCount || len(recv) > maxCount {
		return fmt.Errorf("rank %d: MPI_Sendrecv: %d/%d bytes, more than one message holds", w.rank, len(send), len(recv))
	}
	var sp, rp unsafe.Pointer
	if len(send) > 0 {
		sp = unsafe.Pointer(&send[0])
	}
	if len(recv) > 0 {
		rp = unsafe.Pointer(&recv[0])
	}
	traffic.sent.Add(int64(len(send)))
	traffic.recv.Add(int64(len(recv)))
	return errorf(C.tr_sendrecv(w.comm, sp, C.int(len(send)), C.int(dest), rp, C.int(len(recv)), C.int(source), C.int(tag)), w.rank, "MPI_Sendrecv")
}

// Msg is one message of an Exchange: float32 or int64 values (one of F32
// and I64 is set), to or from rank Peer, with Tag.
type Msg struct {
	F32       []float32
	I64       []int64
	Peer, Tag int
}

func (m Msg) parts() (p unsafe.Pointer, n, typ, bytes int) {
	if m.I64 != nil {
		if len(m.I64) > 0 {
			p = unsafe.Pointer(&m.I64[0])
		}
		return p, len(m.I64), cI64, 8 * len(m.I64)
	}
	if len(m.F32) > 0 {
		p = unsafe.Pointer(&m.F32[0])
	}
	return p, len(m.F32), cF32, 4 * len(m.F32)
}

// Exchange posts every receive in recv, then every send in send, and
// waits until all are done (MPI_Irecv, MPI_Isend, MPI_Waitall, in one
// call). Because its receives are posted before anything is sent, a peer's
// blocking send to this rank always finds its receive, however long this
// rank's own sends wait: ranks that talk to several peers this way (a
// worker and its parameter servers) cannot close a cycle of waits.
func (w *World) Exchange(send, recv []Msg) (err error) {
	n := len(send) + len(recv)
	if n == 0 {
		return nil
	}
	// The addresses go to C in C memory, so the buffers are pinned for
	// the call (cgo's rule for Go pointers stored in C memory).
	bufs := unsafe.Slice((*unsafe.Pointer)(C.malloc(C.size_t(n)*C.size_t(unsafe.Sizeof(unsafe.Pointer(nil))))), n)
	defer C.free(unsafe.Pointer(&bufs[0]))
	ints := unsafe.Slice((*C.int)(C.malloc(C.size_t(4*n)*C.size_t(unsafe.Sizeof(C.int(0))))), 4*n)
	defer C.free(unsafe.Pointer(&ints[0]))
	counts, types, peers, tags := ints[:n], ints[n:2*n], ints[2*n:3*n], ints[3*n:]
	var pin runtime.Pinner
	defer pin.Unpin()
	var sent, received int
	msgs := append(append([]Msg{}, recv...), send...)
	for i, m := range msgs {
		p, count, typ, bytes := m.parts()
		if count > maxCount {
			return fmt.Errorf("rank %d: exchange with rank %d: %d values, more than one message holds", w.rank, m.Peer, count)
		}
		if p != nil {
			pin.Pin(p)
		}
		bufs[i], counts[i], types[i], peers[i], tags[i] = p, C.int(count), C.int(typ), C.int(m.Peer), C.int(m.Tag)
		if i < len(recv) {
			received += bytes
		} else {
			sent += bytes
		}
	}
	traffic.sent.Add(int64(sent))
	traffic.recv.Add(int64(received))
	// One event per message (begun once all are known valid), all of
	// them ending when the last does.
	var ids [16]uint64
	rec := ids[:0]
	if w.fl != nil {
		for i, m := range msgs {
			_, _, typ, bytes := m.parts()
			op := "send"
			if i < len(recv) {
				op = "recv"
			}
			rec = append(rec, w.fl.BeginMsg(op, "", m.Peer, m.Tag, int64(bytes), dtypes[C.int(typ)]))
		}
		defer func() {
			for _, id := range rec {
				w.fl.End(id, err)
			}
		}()
	}
	return errorf(C.tr_exchange(w.comm, C.int(len(recv)), C.int(len(send)), &bufs[0], &counts[0], &types[0], &peers[0], &tags[0]), w.rank, "MPI_Irecv/MPI_Isend/MPI_Waitall")
}
