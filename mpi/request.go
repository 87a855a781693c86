package mpi

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"

	"train/flightrec"
)

// Request is a non-blocking send or receive in flight, as a pipeline
// stage posts them: the next micro-batch's activations are received, and
// the last one's sent, while this one computes. Its buffer belongs to MPI
// until Wait (or a Test that reports done) returns: it is pinned until
// then, and must be neither read (a receive) nor written (a send).
type Request struct {
	h    C.MPI_Request
	pin  runtime.Pinner
	rank int
	op   string
	done bool
	fl   *flightrec.Comm // the recorder's, and this request's event
	id   uint64
}

// IsendFloat32 starts sending buf to rank dest with tag.
func (w *World) IsendFloat32(buf []float32, dest, tag int) (*Request, error) {
	r, p, err := w.request(buf, "MPI_Isend(float32)", dest)
	if err != nil {
		return nil, err
	}
	traffic.sent.Add(4 * int64(len(buf)))
	r.fl, r.id = w.fl, w.fl.BeginMsg("send", "nonblocking", dest, tag, 4*int64(len(buf)), "float32")
	if err := r.started(C.tr_isend(w.comm, p, C.int(len(buf)), cF32, C.int(dest), C.int(tag), &r.h)); err != nil {
		return nil, err
	}
	return r, nil
}

// IrecvFloat32 starts receiving len(buf) float32 values from rank source
// with tag.
func (w *World) IrecvFloat32(buf []float32, source, tag int) (*Request, error) {
	r, p, err := w.request(buf, "MPI_Irecv(float32)", source)
	if err != nil {
		return nil, err
	}
	traffic.recv.Add(4 * int64(len(buf)))
	r.fl, r.id = w.fl, w.fl.BeginMsg("recv", "nonblocking", source, tag, 4*int64(len(buf)), "float32")
	if err := r.started(C.tr_irecv(w.comm, p, C.int(len(buf)), cF32, C.int(source), C.int(tag), &r.h)); err != nil {
		return nil, err
	}
	return r, nil
}

func (w *World) request(buf []float32, op string, peer int) (*Request, unsafe.Pointer, error) {
	if len(buf) > maxCount {
		return nil, nil, fmt.Errorf("rank %d: %s with rank %d: %d elements, more than one message holds", w.rank, op, peer, len(buf))
	}
	r := &Request{rank: w.rank, op: op}
	var p unsafe.Pointer
	if len(buf) > 0 {
		p = unsafe.Pointer(&buf[0])
		r.pin.Pin(p)
	}
	return r, p, nil
}

func (r *Request) started(rc C.int) error {
	if err := errorf(rc, r.rank, r.op); err != nil {
		r.fl.End(r.id, err)
		r.finish()
		return err
	}
	return nil
}

// Wait blocks until the request completes. Waiting again returns nil.
func (r *Request) Wait() error {
	if r.done {
		return nil
	}
	defer r.finish()
	err := errorf(C.tr_wait(&r.h), r.rank, r.op+" (MPI_Wait)")
	r.fl.End(r.id, err)
	return err
}

// Test reports whether the request has completed, without blocking.
func (r *Request) Test() (bool, error) {
	if r.done {
		return true, nil
	}
	var flag C.int
	if err := errorf(C.tr_test(&r.h, &flag), r.rank, r.op+" (MPI_Test)"); err != nil {
		r.fl.End(r.id, err)
		r.finish()
		return true, err
	}
	if flag != 0 {
		r.fl.End(r.id, nil)
		r.finish()
	}
	return flag != 0, nil
}

func (r *Request) finish() {
	r.done = true
	r.pin.Unpin()
}

// WaitAll waits for every request, returning the first error.
func WaitAll(rs ...*Request) error {
	var first error
	for _, r := range rs {
		if r == nil {
			continue
		}
		if err := r.Wait(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
