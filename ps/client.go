package ps

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"train/mpi"
)

// The protocol's tags (see the package documentation).
const (
	TagHeader = 0x5053
	TagData   = 0x5054
	TagGrad   = 0x5055
)

// Request kinds, the first value of a header.
const (
	kindStop  = 0
	kindStep  = 1
	kindState = 2
	kindFetch = 3
	kindPull  = 4

	headerLen = 4
)

// Shards cuts n elements into k contiguous shards whose lengths differ by
// at most one.
func Shards(n, k int) [][2]int {
	out := make([][2]int, k)
	for s := range k {
		out[s] = [2]int{s * n / k, (s + 1) * n / k}
	}
	return out
}

// Client is a worker's side of the protocol.
type Client struct {
	w       *mpi.World
	shards  [][2]int
	workers int
	coloc   bool
}

// NewClient talks to len(shards) servers over w, where ranks 0..workers-1
// are the workers and the servers are the next ranks, or, colocated,
// ranks 0..K-1 (see the package documentation).
func NewClient(w *mpi.World, shards [][2]int, workers int, colocated bool) *Client {
	return &Client{w: w, shards: shards, workers: workers, coloc: colocated}
}

// Shards are the servers' shards, by server.
func (c *Client) Shards() [][2]int { return c.shards }

// ServerRank is the rank of shard s's server.
func (c *Client) ServerRank(s int) int {
	if c.coloc {
		return s
	}
	return c.workers + s
}

// header is a request's header for every server.
func header(kind, t int, lr float64, pull bool) []int64 {
	h := []int64{int64(kind), int64(t), int64(math.Float64bits(lr)), 0}
	if pull {
		h[3] = 1
	}
	return h
}

// Step is update t of this worker: with push it sends grads (each server
// its shard) at learning rate lr; with pull it receives the servers'
// parameters into params. ps-sync always does both; ps-async's
// --push-every and --fetch-every thin them out (a pull alone is a Pull
// request). Neither: nothing is sent.
func (c *Client) Step(params, grads []float32, lr float64, t int, push, pull bool) error {
	if !push && !pull {
		return nil
	}
	hdr := header(kindStep, t, lr, pull)
	if !push {
		hdr = header(kindPull, t, 0, false)
	}
	var send, recv []mpi.Msg
	for s, sh := range c.shards {
		to := c.ServerRank(s)
		send = append(send, mpi.Msg{I64: hdr, Peer: to, Tag: TagHeader})
		if push {
			send = append(send, mpi.Msg{F32: grads[sh[0]:sh[1]], Peer: to, Tag: TagGrad})
		}
		if pull {
			recv = append(recv, mpi.Msg{F32: params[sh[0]:sh[1]], Peer: to, Tag: TagData})
		}
	}
	if err := c.w.Exchange(send, recv); err != nil {
		return fmt.Errorf("parameter servers, update %d: %w", t, err)
	}
	return nil
}

// Fetch receives every server's current parameters into params (ps-async:
// once every worker has pushed all it will, the replicas then agree).
func (c *Client) Fetch(params []float32) error {
	return c.request(kindFetch, params, nil)
}

// FetchState receives every server's shard of the parameters and of each
// optimizer state buffer (rank 0, before a checkpoint).
func (c *Client) FetchState(params []float32, state map[string][]float32) error {
	return c.request(kindState, params, state)
}

func (c *Client) request(kind int, params []float32, state map[string][]float32) error {
	names := slices.Sorted(maps.Keys(state))
	var send, recv []mpi.Msg
	hdr := header(kind, 0, 0, false)
	for s, sh := range c.shards {
		from := c.ServerRank(s)
		send = append(send, mpi.Msg{I64: hdr, Peer: from, Tag: TagHeader})
		// One rank's messages on one tag arrive in order: parameters
		// first, then the state buffers in name order.
		recv = append(recv, mpi.Msg{F32: params[sh[0]:sh[1]], Peer: from, Tag: TagData})
		for _, n := range names {
			recv = append(recv, mpi.Msg{F32: state[n][sh[0]:sh[1]], Peer: from, Tag: TagData})
		}
	}
	if err := c.w.Exchange(send, recv); err != nil {
		return fmt.Errorf("parameter servers: %w", err)
	}
	return nil
}

// Stop tells every server that this worker is done.
func (c *Client) Stop() error {
	var send []mpi.Msg
	for s := range c.shards {
		send = append(send, mpi.Msg{I64: header(kindStop, 0, 0, false), Peer: c.ServerRank(s), Tag: TagHeader})
	}
	return c.w.Exchange(send, nil)
}
