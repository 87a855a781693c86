package mpi

/*
#cgo LDFLAGS: -lrt
#include <stdlib.h>
#include <unistd.h>
#include "shm.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"unsafe"

	"train/flightrec"
)

// Shm is the shared-memory transport of ranks on one host. Each rank's
// buffer (the gradient) lives in one POSIX shared-memory segment that
// every rank maps, and an allreduce is: wait for every rank; rank r sums
// its 1/N of the buffer straight out of every rank's copy and writes the
// sum back into every copy (one fused read-add-write per element, no
// kernel copy), then sums what is left of the others' shares, block by
// block, so that a slower rank does less; wait again. Each element is
// read and written once per rank, which is one memcpy of the buffer per
// rank.
//
// Why not the ring over MPI within a host: OpenMPI's vader moves data
// with CMA (process_vm_readv), a kernel copy done by the receiver, at a
// third of a user-space memcpy here; and the receiver then adds on the
// same core (docs/BENCHMARKS.md). Reading the other ranks' memory
// directly skips the copy.
//
// Only buffers inside Region are reduced here (Holds); the segment is
// unlinked once every rank has mapped it, so a killed job leaves nothing
// in /dev/shm. Peak RSS counts the pages of other ranks' copies a rank has
// read or written (shared, counted once per process by the kernel's RSS).
type Shm struct {
	w            *World
	base         unsafe.Pointer
	bytes        int
	ctl, stride  int // bytes: the control lines, one rank's region
	n            int // floats per region
	seq          atomic.Uint64
	regionBuffer []float32
	oversub      C.int // the host's ranks outnumber its CPUs: barriers yield (shm.c)
}

const shmPage = 4096

var shmCount atomic.Int64

// NewShm maps a segment of one region of n floats per rank of w, whose
// ranks must share one host (collective). An error on any rank is every
// rank's error (no rank goes on with the segment alone).
func (w *World) NewShm(n int) (*Shm, error) {
	s := &Shm{w: w, n: n}
	s.ctl = (3*w.size*64 + shmPage - 1) / shmPage * shmPage // the ranks' arrival lines, then two sets of claim counters (shm.c)
	s.stride = (4*n + shmPage - 1) / shmPage * shmPage
	s.bytes = s.ctl + w.size*s.stride
	name := make([]byte, 64)
	copy(name, fmt.Sprintf("/train-%d-%d", os.Getpid(), shmCount.Add(1)))
	if err := w.BcastBytes(name, 0); err != nil {
		return nil, err
	}
	cname := C.CString(string(name[:clen(name)]))
	defer C.free(unsafe.Pointer(cname))
	// Rank 0 creates the segment before the others open it.
	var errno C.int
	if w.rank == 0 {
		errno = C.tr_shm_map(cname, C.size_t(s.bytes), 1, &s.base)
	}
	if err := s.agree(errno, "create"); err != nil {
		return nil, err
	}
	if w.rank != 0 {
		errno = C.tr_shm_map(cname, C.size_t(s.bytes), 0, &s.base)
	}
	err := s.agree(errno, "map")
	if w.rank == 0 {
		C.tr_shm_unlink(cname)
	}
	if err != nil {
		s.unmap()
		return nil, err
	}
	s.regionBuffer = unsafe.Slice((*float32)(unsafe.Add(s.base, s.ctl+w.rank*s.stride)), n)
	if oversubscribed(w.size) {
		s.oversub = 1
	}
	return s, nil
}

// oversubscribed reports whether size ranks of one host outnumber the CPUs
// they share (oversubscribedOf with this process's affinity and the
// online CPUs).
func oversubscribed(size int) bool {
	return oversubscribedOf(runtime.NumCPU(), int(C.sysconf(C._SC_NPROCESSORS_ONLN)), size)
}

// oversubscribedOf: a rank that may use avail of the host's online CPUs,
// one of size ranks there, shares them with the others when the launcher
// did not bind it (avail is every online CPU; mpirun binds to cores only
// where they suffice), and then the ranks outnumber them when size >
// online. A bound rank has its own (online 0: unknown, taken as not).
// The same reading of "bound" as trainer's perRank (cores.go), which
// sizes the pool from it; mpi cannot import trainer, and the two differ
// in what they return.
func oversubscribedOf(avail, online, size int) bool {
	return online > 0 && avail >= online && size > online
}

func clen(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return len(b)
}

// agree fails on every rank when errno is set on any.
func (s *Shm) agree(errno C.int, what string) error {
	v := []int64{int64(errno)}
	if err := s.w.AllreduceInt64(v, Max); err != nil {
		return err
	}
	if v[0] != 0 {
		return fmt.Errorf("shared memory (%s %d MiB in /dev/shm): %v", what, s.bytes>>20, syscall.Errno(v[0]))
	}
	return nil
}

// Region is this rank's buffer in the segment (zeroed).
func (s *Shm) Region() []float32 { return s.regionBuffer }

// Holds reports whether buf lies inside Region. An empty buf does (at
// offset 0): it is a call on the segment like any other, so that a rank
// passing one where the others pass theirs fails with them rather than
// go elsewhere and leave them waiting.
func (s *Shm) Holds(buf []float32) bool {
	if s == nil {
		return false
	}
	if len(buf) == 0 {
		return true
	}
	p, lo := uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&s.regionBuffer[0]))
	return p >= lo && p+4*uintptr(len(buf)) <= lo+4*uintptr(s.n)
}

// offset is buf's place in Region, in floats; an empty buf's is 0 (it
// names no element, and the ranks' slices then agree only when all are
// empty).
func (s *Shm) offset(buf []float32) C.size_t {
	if len(buf) == 0 {
		return 0
	}
	if !s.Holds(buf) {
		panic("mpi: shared-memory collective on a buffer outside the segment")
	}
	return C.size_t((uintptr(unsafe.Pointer(&buf[0])) - uintptr(unsafe.Pointer(&s.regionBuffer[0]))) / 4)
}

// AllreduceFloat32 sums (or averages, op Mean) buf, a slice of Region at
// the same offset on every rank, in place. Each element is summed once,
// by one rank, in the order RingAllreduceFloat32 sums it, and written to
// all: bit-identical replicas, and the ring's bits. Where the ranks'
// slices differ (a rank's bucket of another length), every rank fails at
// this call, naming the first such rank, and no value changes. An empty
// buf is a call like any other (the barriers, the slice check): a rank
// that passed nothing while the others passed a bucket would otherwise
// return at once and leave them waiting for it.
func (s *Shm) AllreduceFloat32(buf []float32, op Op) (err error) {
	if op != Sum && op != Mean {
		panic("mpi: shared-memory allreduce supports Sum and Mean")
	}
	if s.w.size == 1 {
		return nil
	}
	traffic.coll.Add(4 * int64(len(buf)))
	mean := C.int(0)
	if op == Mean {
		mean = 1
	}
	id := s.w.fl.Begin("allreduce", "shm", flightrec.All, 4*int64(len(buf)), "float32")
	defer func() { s.w.fl.End(id, err) }()
	var bad [4]C.uint64_t
	q := C.tr_shm_allreduce(s.base, C.size_t(s.ctl), C.size_t(s.stride), C.int(s.w.rank), C.int(s.w.size), s.oversub, s.offset(buf), C.size_t(len(buf)), mean, C.uint64_t(s.seq.Add(1)), &bad[0])
	return sliceErr("allreduce", q, bad)
}

// SliceError is a shared-memory collective whose ranks called it on
// different slices of their regions: Rank, the first rank whose slice
// (Off, N floats) is not rank 0's (Off0, N0). Every rank of the segment
// gets it at the same call, none having changed a value, so a caller
// whose segment spans its world may end the job as one (trainer's
// JobError).
type SliceError struct {
	Op               string
	Rank             int
	Off, N, Off0, N0 uint64
}

func (e *SliceError) Error() string {
	return fmt.Sprintf("shared-memory %s: rank %d called it on %d floats at offset %d of its region, rank 0 on %d at %d: every rank must pass the same slice", e.Op, e.Rank, e.N, e.Off, e.N0, e.Off0)
}

// sliceErr is tr_shm_allreduce's or tr_shm_bcast's answer as an error:
// nil for q < 0, else a SliceError for rank q (bad: its offset and
// length, then rank 0's).
func sliceErr(op string, q C.int, bad [4]C.uint64_t) error {
	if q < 0 {
		return nil
	}
	return &SliceError{op, int(q), uint64(bad[0]), uint64(bad[1]), uint64(bad[2]), uint64(bad[3])}
}

// BcastFloat32 copies root's buf (a slice of Region at the same offset on
// every rank) into every rank's; it fails as AllreduceFloat32 does.
func (s *Shm) BcastFloat32(buf []float32, root int) (err error) {
	if s.w.size == 1 {
		return nil
	}
	traffic.coll.Add(4 * int64(len(buf)))
	id := s.w.fl.Begin("bcast", "shm", flightrec.All, 4*int64(len(buf)), "float32")
	defer func() { s.w.fl.End(id, err) }()
	var bad [4]C.uint64_t
	q := C.tr_shm_bcast(s.base, C.size_t(s.ctl), C.size_t(s.stride), C.int(s.w.rank), C.int(s.w.size), s.oversub, C.int(root), s.offset(buf), C.size_t(len(buf)), C.uint64_t(s.seq.Add(1)), &bad[0])
	return sliceErr("broadcast", q, bad)
}

func (s *Shm) unmap() {
	if s.base != nil {
		C.tr_shm_unmap(s.base, C.size_t(s.bytes))
		s.base = nil
	}
}

// Free unmaps the segment (after the last collective on it; Region is
// invalid afterwards).
func (s *Shm) Free() {
	if s != nil {
		s.unmap()
	}
}
