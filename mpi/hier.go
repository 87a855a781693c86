package mpi

/*
#include "shim.h"
*/
import "C"

import (
	"unsafe"

	"train/flightrec"
)

// Hier is the hierarchical allreduce (Horovod's
// HOROVOD_HIERARCHICAL_ALLREDUCE): reduce within each host over shared
// memory to the host's leader (its local rank 0), ring allreduce among the
// leaders, broadcast within the host. Across hosts only one rank per host
// sends, 2(H-1)/H of the buffer for H hosts, instead of every rank's share
// of an N-rank ring; the ring's 2(N-1) steps become 2(H-1) between hosts.
type Hier struct {
	Compress Compression // the leaders' ring's wire format (between hosts)

	world   *World
	local   *World // this host's ranks (MPI_COMM_TYPE_SHARED)
	leaders *World // every host's local rank 0; the other ranks' is unused
	hosts   int
	shm     *Shm // the host's ranks' shared segment, once UseShm made it
}

// NewHier makes the communicators of the hierarchical allreduce
// (collective: every rank of w calls it).
func (w *World) NewHier() (*Hier, error) {
	local := &World{localRank: w.localRank, localSize: w.localSize, dup: true}
	var rank, size C.int
	if rc := C.tr_split_shared(w.comm, &local.comm, &rank, &size); rc != C.MPI_SUCCESS {
		return nil, errorf(rc, w.rank, "MPI_Comm_split_type(shared)")
	}
	local.rank, local.size = int(rank), int(size)
	if rc := C.tr_dup(local.comm, &local.ring); rc != C.MPI_SUCCESS {
		return nil, errorf(rc, w.rank, "MPI_Comm_dup")
	}
	color := 1
	if local.rank == 0 {
		color = 0
	}
	leaders, err := w.Split(color, w.rank)
	if err != nil {
		return nil, err
	}
	// Every rank learns the number of hosts: the leaders' communicator's
	// size, from the world's rank 0 (a leader).
	n := []int64{int64(leaders.size)}
	if err := w.BcastInt64(n, 0); err != nil {
		return nil, err
	}
	return &Hier{world: w, local: local, leaders: leaders, hosts: int(n[0])}, nil
}

// UseShm makes the host's ranks share a segment of n floats per rank
// (collective) and returns this rank's region: buffers inside it take the
// shared-memory transport (Shm) for the stages within the host, the sum
// and the broadcast, instead of MPI_Reduce and MPI_Bcast.
func (h *Hier) UseShm(n int) ([]float32, error) {
	s, err := h.local.NewShm(n)
	if err != nil {
		return nil, err
	}
	h.shm = s
	return s.Region(), nil
}

// Hosts is the number of hosts (shared-memory nodes) the world spans.
func (h *Hier) Hosts() int { return h.hosts }

// AllreduceFloat32 sums (or averages, op Mean) buf across the world in
// place. Every rank ends with the leaders' bits: bit-identical replicas.
func (h *Hier) AllreduceFloat32(buf []float32, op Op) error {
	id := h.world.fl.Begin("allreduce", "hier", flightrec.All, 4*int64(len(buf)), "float32")
	err := h.allreduce(buf, op)
	h.world.fl.End(id, err)
	return err
}

func (h *Hier) allreduce(buf []float32, op Op) error {
	if op != Sum && op != Mean {
		panic("mpi: hierarchical allreduce supports Sum and Mean")
	}
	l := h.local
	if len(buf) == 0 {
		// An empty slice still meets the host's other ranks in the
		// segment and the other hosts' leaders in their ring: where theirs
		// are not empty, the call fails (every rank of the host with a
		// SliceError, the ring's neighbours with its mismatch) instead of
		// leaving them waiting.
		if l.size > 1 && h.shm.Holds(buf) {
			if err := h.shm.AllreduceFloat32(buf, Sum); err != nil {
				return err
			}
		}
		if l.rank == 0 {
			return h.leaders.ringAllreduce(buf, Sum, h.Compress)
		}
		return nil
	}
	if h.world.size == 1 {
		return nil
	}
	shm := l.size > 1 && h.shm.Holds(buf)
	if shm {
		if err := h.shm.AllreduceFloat32(buf, Sum); err != nil {
			return err
		}
	} else if l.size > 1 {
		traffic.coll.Add(4 * int64(len(buf)))
		rc := chunks(unsafe.Pointer(&buf[0]), len(buf), 4, func(p unsafe.Pointer, n int) C.int {
			return C.tr_reduce_sum(l.comm, p, C.int(n), cF32, 0, C.int(l.rank))
		})
		if err := errorf(rc, h.world.rank, "MPI_Reduce(host)"); err != nil {
			return err
		}
	}
	if l.rank == 0 {
		if err := h.leaders.ringAllreduce(buf, Sum, h.Compress); err != nil {
			return err
		}
		if op == Mean {
			C.tr_scale_f32((*C.float)(unsafe.Pointer(&buf[0])), C.float(1/float32(h.world.size)), C.long(len(buf)))
		}
	}
	if shm {
		return h.shm.BcastFloat32(buf, 0)
	}
	if l.size > 1 {
		return l.BcastFloat32(buf, 0)
	}
	return nil
}

// Free releases the communicators (collective).
func (h *Hier) Free() {
	h.shm.Free()
	h.leaders.Free()
	h.local.Free()
}
