// Package plan is train's cost model: predicted step time and scaling
// efficiency of each strategy on N nodes, from the model's size, a
// measured compute time per step and the network's latency and bandwidth
// (train plan).
//
// Every message of m bytes costs alpha + m*beta (Hockney's model: alpha
// the latency, beta the inverse bandwidth of one node's link, full duplex),
// and reducing m bytes costs m*gamma. The collective algorithms follow
// Thakur, Rabenseifner and Gropp, "Optimization of Collective Communication
// Operations in MPICH" (2005), with p nodes and n bytes:
//
//	ring (reduce-scatter + all-gather)  2(p-1) alpha + 2(p-1)/p n beta + (p-1)/p n gamma
//	recursive doubling                   lg p (alpha + n beta + n gamma)
//	Rabenseifner (halving + doubling)    2 lg p alpha + 2(p-1)/p n beta + (p-1)/p n gamma
//
// Parameter servers: W workers push their gradient (n/K bytes to each of
// K servers) and pull the parameters back; a separate server's link
// carries W n/K bytes each way, a worker's n bytes each way, and the busier
// link sets the time. Colocated (every node a worker and a server, K = p),
// each node pushes (p-1)/p n bytes in p-1 messages and pulls as much back:
// the ring's volume and message count. Asynchronous servers remove the barrier
// but not the server's link. Local SGD averages the parameters (and the
// optimizer's state) with a ring every H steps.
//
// With a 16-bit wire format (--compress), ring and hier put half the bytes
// on the link and pay an encode and a decode per byte sent and received
// (RingWire); the other strategies send float32.
//
// Communication is assumed not to overlap computation: the predictions are
// upper bounds for the allreduce strategies, whose buckets overlap
// backward.
package plan

import (
	"fmt"
	"math"
)

// Network is one node's link.
type Network struct {
	LatencyS     float64 // alpha, seconds per message
	BytesPerS    float64 // 1/beta, per direction
	ReduceBytesS float64 // 1/gamma: how fast a node adds float32 data
	// IntraBytesS is how fast a collective moves data between the ranks of
	// one node (shared memory), for several ranks per node; 0: as fast as
	// ReduceBytesS.
	IntraBytesS float64
	// ConvertBytesS is how fast a node encodes float32 data to a 16-bit
	// wire format and decodes it back (the compressed ring's extra work per
	// byte sent and received); 0: free.
	ConvertBytesS float64
}

func (n Network) intra() float64 {
	if n.IntraBytesS > 0 {
		return n.IntraBytesS
	}
	return n.ReduceBytesS
}

// Job is what is being scaled.
type Job struct {
	ParamBytes   float64 // the flat gradient (= parameter) buffer
	StateBytes   float64 // optimizer state averaged by local SGD (e.g. momentum)
	ComputeS     float64 // one step's compute on one node (forward, backward, update)
	BatchPerRank int
	Servers      int // parameter servers for the ps strategies (separate nodes)
	SyncEvery    int // local SGD's H
	RanksPerNode int // ranks (workers) per node; 0 or 1: one
	// Wire is the gradient allreduce's bytes on the wire per float32 byte
	// for ring and hier (--compress fp16/bf16: 0.5); 0 or 1: float32.
	Wire float64
}

// Prediction is one strategy on p nodes.
type Prediction struct {
	Strategy   string
	Nodes      int     // all nodes, servers included
	Workers    int     // ranks computing
	CommS      float64 // communication per step (amortised for local SGD)
	StepS      float64 // predicted step time
	Efficiency float64 // samples/s per worker relative to one node without communication
	SamplesS   float64 // whole-job throughput
}

func lg(p int) float64 { return math.Ceil(math.Log2(float64(p))) }

// Ring is the ring allreduce's time for n bytes on p nodes.
func Ring(net Network, p int, n float64) float64 {
	if p <= 1 {
		return 0
	}
	f := float64(p-1) / float64(p)
	return 2*float64(p-1)*net.LatencyS + 2*f*n/net.BytesPerS + f*n/net.ReduceBytesS
}

// RingWire is Ring with wire bytes on the link per float32 byte (the
// compressed ring: 0.5), the messages as many as before, the additions in
// float32, and every byte sent encoded and every byte received decoded.
func RingWire(net Network, p int, n, wire float64) float64 {
	if p <= 1 {
		return 0
	}
	if wire <= 0 || wire >= 1 {
		return Ring(net, p, n)
	}
	f := float64(p-1) / float64(p)
	t := 2*float64(p-1)*net.LatencyS + 2*f*n*wire/net.BytesPerS + f*n/net.ReduceBytesS
	if net.ConvertBytesS > 0 {
		t += 2 * f * n / net.ConvertBytesS
	}
	return t
}

// RecursiveDoubling is the recursive-doubling allreduce's time.
func RecursiveDoubling(net Network, p int, n float64) float64 {
	if p <= 1 {
		return 0
	}
	return lg(p) * (net.LatencyS + n/net.BytesPerS + n/net.ReduceBytesS)
}

// Rabenseifner is the reduce-scatter by recursive halving plus all-gather
// by recursive doubling.
func Rabenseifner(net Network, p int, n float64) float64 {
	if p <= 1 {
		return 0
	}
	f := float64(p-1) / float64(p)
	return 2*lg(p)*net.LatencyS + 2*f*n/net.BytesPerS + f*n/net.ReduceBytesS
}

// PSSync is one synchronous parameter-server round: W workers, K separate
// servers.
func PSSync(net Network, workers, servers int, n float64) float64 {
	if workers < 1 || servers < 1 {
		return math.Inf(1)
	}
	shard := n / float64(servers)
	worker := 2*float64(servers)*net.LatencyS + 2*n/net.BytesPerS
	server := 2*float64(workers)*net.LatencyS + 2*float64(workers)*shard/net.BytesPerS + float64(workers)*shard/net.ReduceBytesS
	return max(worker, server)
}

// PSColocated is a synchronous round with a server beside every worker:
// each node sends its p-1 foreign shards and receives p-1 back, which costs
// what the ring costs (the same messages, bytes and additions).
func PSColocated(net Network, p int, n float64) float64 { return Ring(net, p, n) }

// Predict gives every strategy's prediction on p nodes. A strategy that
// cannot run there (parameter servers on too few nodes) is left out.
func Predict(net Network, job Job, p int) []Prediction {
	var out []Prediction
	add := func(name string, workers int, comm, step float64) {
		ideal := job.ComputeS
		out = append(out, Prediction{Strategy: name, Nodes: p, Workers: workers, CommS: comm, StepS: step,
			Efficiency: ideal / step, SamplesS: float64(workers*job.BatchPerRank) / step})
	}
	n := job.ParamBytes
	rpn := max(job.RanksPerNode, 1)
	ranks := p * rpn
	// With several ranks per node (placed in blocks, as mpirun's --map-by
	// slot does) the ring over all ranks crosses each node's link once each
	// way: the link carries what one rank of a one-rank-per-node ring does,
	// for the ring of all ranks; hops inside a node cost no link time but
	// still a latency.
	ring := Ring(net, ranks, n)
	add("ring", ranks, RingWire(net, ranks, n, job.Wire), job.ComputeS+RingWire(net, ranks, n, job.Wire))
	mpi := min(RecursiveDoubling(net, ranks, n), Rabenseifner(net, ranks, n), ring)
	if rpn > 1 {
		// Recursive halving with the partners inside a node first (the low
		// bits of the rank, under block placement): the node's ranks halve
		// the data among themselves through memory, then each sends its
		// 1/R across, so a node's link carries 2(p-1)/p n in all, what
		// hier's leaders send.
		f := float64(ranks-1) / float64(ranks)
		node := 2*lg(ranks)*net.LatencyS + 2*float64(p-1)/float64(p)*n/net.BytesPerS +
			2*float64(rpn-1)/float64(rpn)*n/net.intra() + f*n/net.ReduceBytesS
		mpi = min(mpi, node)
	}
	add("mpi", ranks, mpi, job.ComputeS+mpi)
	if rpn > 1 {
		// hier: reduce to and broadcast from a leader within the node, the
		// ring among the p leaders.
		h := 2*n/net.intra() + RingWire(net, p, n, job.Wire)
		add("hier", ranks, h, job.ComputeS+h)
	}
	if k := job.Servers; k >= 1 && p-k >= 1 && rpn == 1 {
		ps := PSSync(net, p-k, k, n)
		add("ps-sync", p-k, ps, job.ComputeS+ps)
		// Without the barrier a worker still waits for its own push and
		// pull, and the servers cannot serve faster than their links.
		worker := 2*float64(k)*net.LatencyS + 2*n/net.BytesPerS
		step := max(job.ComputeS+worker, ps)
		add("ps-async", p-k, step-job.ComputeS, step)
	}
	if rpn == 1 {
		col := PSColocated(net, p, n)
		add("ps-sync-colocated", p, col, job.ComputeS+col)
	}
	h := max(job.SyncEvery, 1)
	avg := Ring(net, ranks, n+job.StateBytes) / float64(h)
	add("local-sgd", ranks, avg, job.ComputeS+avg)
	return out
}

// Validate checks a job and network.
func (j Job) Validate() error {
	switch {
	case j.ParamBytes <= 0:
		return fmt.Errorf("the model has no parameters")
	case j.ComputeS <= 0:
		return fmt.Errorf("--compute-ms must be positive (measure it with train bench step)")
	case j.BatchPerRank < 1:
		return fmt.Errorf("--batch-size must be positive")
	case j.Servers < 0:
		return fmt.Errorf("--servers must not be negative")
	case j.RanksPerNode < 0:
		return fmt.Errorf("--ranks-per-node must not be negative")
	}
	return nil
}

// Validate checks the network.
func (n Network) Validate() error {
	if n.LatencyS < 0 || n.BytesPerS <= 0 || n.ReduceBytesS <= 0 || n.IntraBytesS < 0 {
		return fmt.Errorf("--latency-us must not be negative, --link-gbps and --reduce-gbs must be positive")
	}
	return nil
}
