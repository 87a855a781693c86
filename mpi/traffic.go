package mpi

import "sync/atomic"

// Traffic is what this process has handed to MPI since it started, in
// bytes. Point-to-point messages (the ring's and the parameter servers')
// are counted as they travel. A collective (MPI_Allreduce, MPI_Bcast) is
// counted by its buffer's size, once, under Collective: what MPI moves for
// it depends on the algorithm MPI picks, which is not visible from here.
type Traffic struct {
	Sent, Received, Collective int64
}

// Sub is t - u, the traffic between two readings.
func (t Traffic) Sub(u Traffic) Traffic {
	return Traffic{t.Sent - u.Sent, t.Received - u.Received, t.Collective - u.Collective}
}

var traffic struct{ sent, recv, coll atomic.Int64 }

// Counted reads the process's traffic counters (all Worlds together).
func Counted() Traffic {
	return Traffic{traffic.sent.Load(), traffic.recv.Load(), traffic.coll.Load()}
}
