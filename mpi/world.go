package mpi

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	gompi "github.com/sbromberger/gompi"

	"train/flightrec"
)

// Op is a reduction operation.
type Op int

// Reductions. Mean is Sum followed by a division by the world size, done
// by us on the reduced buffer (MPI has no mean).
const (
	Sum Op = iota
	Max
	Min
	Mean
)

func (op Op) c() C.int {
	switch op {
	case Max:
		return C.TR_MAX
	case Min:
		return C.TR_MIN
	default:
		return C.TR_SUM
	}
}

// World is the process's handle on the job: its rank and size, its place
// on the node, and the collectives training needs. It is the only
// process-wide MPI state; main creates it with Init and passes it down.
//
// Methods return errors instead of aborting; Abort ends the whole job.
type World struct {
	comm      C.MPI_Comm
	rank      int
	size      int
	localRank int
	localSize int
	done      bool
	dup       bool // made by Dup: Free, not Finalize

	// The ring allreduce's communicator and scratch slots (ring.go).
	ring    C.MPI_Comm
	scratch []float32

	fl *flightrec.Comm // this communicator's calls in the flight recorder; nil: not recorded
}

// Record makes rec record this World's calls under name, which must be
// the same on every member and unique in the job (flightrec.Recorder.Comm).
// Call it before the World's first collective, on every member.
func (w *World) Record(rec *flightrec.Recorder, name string) {
	w.fl = rec.Comm(name, w.rank, w.size)
}

// Flight is the World's recorder counters, for calls made outside this
// package that belong to it (a GPU allreduce among its ranks) and for
// labelling the next collective; nil (which records nothing) when the
// World is not recorded.
func (w *World) Flight() *flightrec.Comm { return w.fl }

// dtypes names the element types for the recorder.
var dtypes = map[C.int]string{cF32: "float32", cF64: "float64", cByte: "byte", cI64: "int64"}

// Init starts MPI (unless it already runs) at MPI_THREAD_MULTIPLE and
// returns the world. Without a launcher (no mpirun, no srun) it is a world
// of size 1: OpenMPI's singleton start.
func Init() (*World, error) {
	var provided C.int
	if rc := C.tr_init(&provided); rc != C.MPI_SUCCESS {
		return nil, errorf(rc, -1, "MPI_Init_thread")
	}
	if provided < C.MPI_THREAD_MULTIPLE {
		gompi.Stop()
		return nil, fmt.Errorf("the MPI library grants thread level %d; train needs MPI_THREAD_MULTIPLE (%d): use an MPI built with thread support (Debian's OpenMPI has it)",
			int(provided), int(C.MPI_THREAD_MULTIPLE))
	}
	w := &World{rank: gompi.WorldRank(), size: gompi.WorldSize()}
	var lrank, lsize C.int
	if rc := C.tr_world(&w.comm, &lrank, &lsize); rc != C.MPI_SUCCESS {
		return nil, errorf(rc, w.rank, "MPI_Comm_dup/MPI_Comm_split_type")
	}
	w.localRank, w.localSize = int(lrank), int(lsize)
	// The ring's own communicator, so its point-to-point messages never
	// match other traffic. Made here because MPI_Comm_dup is collective.
	if rc := C.tr_dup(w.comm, &w.ring); rc != C.MPI_SUCCESS {
		return nil, errorf(rc, w.rank, "MPI_Comm_dup(ring)")
	}
	return w, nil
}

// Dup returns a World over the same ranks with communicators of its own,
// for collectives that run concurrently with this world's (synchronised
// BatchNorm in the training goroutine while the communication goroutine
// reduces gradients). It is collective: every rank calls it at the same
// point. Finalize the original only; Free releases a duplicate.
func (w *World) Dup() (*World, error) {
	d := &World{rank: w.rank, size: w.size, localRank: w.localRank, localSize: w.localSize, dup: true}
	if rc := C.tr_dup(w.comm, &d.comm); rc != C.MPI_SUCCESS {
		return nil, errorf(rc, w.rank, "MPI_Comm_dup")
	}
	if rc := C.tr_dup(w.comm, &d.ring); rc != C.MPI_SUCCESS {
		return nil, errorf(rc, w.rank, "MPI_Comm_dup(ring)")
	}
	return d, nil
}

// Split divides the world into groups of the same color (collective, like
// MPI_Comm_split), ranked by key then by rank. The parameter-server
// strategies make the workers a World of their own this way, so their
// collectives never wait for the servers. Free it like a Dup.
func (w *World) Split(color, key int) (*World, error) {
	d := &World{localRank: w.localRank, localSize: w.localSize, dup: true}
	var rank, size C.int
	if rc := C.tr_split(w.comm, C.int(color), C.int(key), &d.comm, &rank, &size); rc != C.MPI_SUCCESS {
		return nil, errorf(rc, w.rank, "MPI_Comm_split")
	}
	d.rank, d.size = int(rank), int(size)
	if rc := C.tr_dup(d.comm, &d.ring); rc != C.MPI_SUCCESS {
		return nil, errorf(rc, w.rank, "MPI_Comm_dup(ring)")
	}
	return d, nil
}

// Free releases a World made by Dup (collective, like MPI_Comm_free).
func (w *World) Free() error {
	if !w.dup || w.done {
		return nil
	}
	w.done = true
	C.tr_free(&w.ring)
	return errorf(C.tr_free(&w.comm), w.rank, "MPI_Comm_free")
}

// Rank is this process's rank in the world, 0 <= Rank < Size.
func (w *World) Rank() int { return w.rank }

// Size is the number of ranks in the job.
func (w *World) Size() int { return w.size }

// LocalRank is this process's rank among the ranks on its node (shared
// memory domain); devices and threads are assigned from it.
func (w *World) LocalRank() int { return w.localRank }

// LocalSize is the number of ranks on this node.
func (w *World) LocalSize() int { return w.localSize }

// AllreduceFloat32 reduces buf across all ranks in place: on return every
// rank holds the element-wise reduction. Every rank must pass the same
// length; an empty buf is a no-op.
func (w *World) AllreduceFloat32(buf []float32, op Op) error {
	return allreduce(w, buf, cF32, op, "MPI_Allreduce(float32)")
}

// AllreduceFloat64 is AllreduceFloat32 for float64 buffers: counters,
// loss sums and metrics that must not lose precision.
func (w *World) AllreduceFloat64(buf []float64, op Op) error {
	return allreduce(w, buf, cF64, op, "MPI_Allreduce(float64)")
}

// AllreduceInt64 reduces int64 values in place (Mean is not defined for
// integers and panics).
func (w *World) AllreduceInt64(buf []int64, op Op) error {
	if op == Mean {
		panic("mpi: Mean of int64")
	}
	return allreduce(w, buf, cI64, op, "MPI_Allreduce(int64)")
}

// BcastFloat32 copies root's buf into every rank's buf (same length on all).
func (w *World) BcastFloat32(buf []float32, root int) error {
	return bcast(w, buf, cF32, root, "MPI_Bcast(float32)")
}

// BcastBytes copies root's buf into every rank's buf, byte for byte (gompi's
// own BcastBytes sends 4 bytes per element and overruns the slice).
func (w *World) BcastBytes(buf []byte, root int) error {
	return bcast(w, buf, cByte, root, "MPI_Bcast(bytes)")
}

// BcastInt64 copies root's values into every rank's buf.
func (w *World) BcastInt64(buf []int64, root int) error {
	return bcast(w, buf, cI64, root, "MPI_Bcast(int64)")
}

// allreduce is the in-place MPI_Allreduce of every element type; Mean
// divides the sum by the world size afterwards (MPI has no mean).
func allreduce[T float32 | float64 | int64](w *World, buf []T, typ C.int, op Op, name string) error {
	if len(buf) == 0 {
		return nil
	}
	bytes := int64(len(buf)) * int64(unsafe.Sizeof(buf[0]))
	traffic.coll.Add(bytes)
	id := w.fl.Begin("allreduce", "mpi", flightrec.All, bytes, dtypes[typ])
	rc := chunks(unsafe.Pointer(&buf[0]), len(buf), int(unsafe.Sizeof(buf[0])), func(p unsafe.Pointer, n int) C.int {
		return C.tr_allreduce(w.comm, p, C.int(n), typ, op.c())
	})
	err := errorf(rc, w.rank, name)
	w.fl.End(id, err)
	if err != nil {
		return err
	}
	if op == Mean && w.size > 1 {
		s := 1 / T(w.size)
		for i := range buf {
			buf[i] *= s
		}
	}
	return nil
}

// bcast is MPI_Bcast of every element type.
func bcast[T byte | float32 | int64](w *World, buf []T, typ C.int, root int, name string) error {
	if len(buf) == 0 {
		return nil
	}
	bytes := int64(len(buf)) * int64(unsafe.Sizeof(buf[0]))
	traffic.coll.Add(bytes)
	id := w.fl.Begin("bcast", "mpi", flightrec.All, bytes, dtypes[typ])
	rc := chunks(unsafe.Pointer(&buf[0]), len(buf), int(unsafe.Sizeof(buf[0])), func(p unsafe.Pointer, n int) C.int {
		return C.tr_bcast(w.comm, p, C.int(n), typ, C.int(root))
	})
	err := errorf(rc, w.rank, name)
	w.fl.End(id, err)
	return err
}

// Barrier returns once every rank has entered it.
func (w *World) Barrier() error {
	id := w.fl.Begin("barrier", "mpi", flightrec.All, 0, "")
	err := errorf(C.tr_barrier(w.comm), w.rank, "MPI_Barrier")
	w.fl.End(id, err)
	return err
}

// QuietBarrier is Barrier unseen by the flight recorder: a step inside a
// collective that its caller records as one call (the GPU ring's steps),
// so a dump names that collective, not its last barrier.
func (w *World) QuietBarrier() error {
	return errorf(C.tr_barrier(w.comm), w.rank, "MPI_Barrier")
}

// Finalize frees the world's communicator and shuts MPI down. Call it once
// on every rank, after the last collective; after a failure call Abort
// instead, since Finalize waits for ranks that may never come.
func (w *World) Finalize() error {
	if w.done {
		return nil
	}
	w.done = true
	C.tr_free(&w.ring)
	err := errorf(C.tr_free(&w.comm), w.rank, "MPI_Comm_free")
	gompi.Stop()
	return err
}

// Abort ends every rank of the job with the given exit code. It does not
// return when MPI honours it (OpenMPI's mpirun kills the other ranks).
func (w *World) Abort(code int) {
	w.done = true
	C.tr_abort(C.int(code))
}
