package ps

import (
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"time"

	"train/mpi"
	"train/optim"
)

// Server is one server's side of the protocol: its shard of the
// parameters and an optimizer for it.
type Server struct {
	W       *mpi.World      // the protocol's communicator (see the package documentation)
	Workers int             // ranks 0..Workers-1 of W
	Params  []float32       // the shard's parameters, updated in place
	Opt     optim.Optimizer // the shard's optimizer, its state already loaded
	// Async serves ps-async (each gradient applied as it comes, answers
	// held back past the Staleness bound; -1: no bound) instead of
	// ps-sync's rounds.
	Async     bool
	Staleness int
	// Poll waits for requests by probing with short sleeps instead of
	// blocking in MPI, which spins: a colocated server's thread shares
	// its rank's core with the worker beside it.
	Poll bool
	// BeforeUpdate, when set, runs before update t is applied (tests
	// inject a server's failure there).
	BeforeUpdate func(t int) error
	// Stale, when set, hears each push's staleness (metrics).
	Stale func(updates int)
}

// Stats is what a server did: updates applied, and under ps-async the
// staleness of the pushes (updates by other workers applied between a
// worker's pull and its push).
type Stats struct {
	Updates, Pushes    int
	StaleMax, StaleSum int
}

// Serve answers the workers until every one has sent Stop.
func (s *Server) Serve() (Stats, error) {
	if s.Async {
		return s.serveAsync()
	}
	return s.serveSync()
}

// await returns once a header from rank from (any rank if from < 0) is
// waiting, and its source.
func (s *Server) await(from int) (int, error) {
	if !s.Poll {
		if from >= 0 {
			return from, nil // the blocking receive that follows waits
		}
		return s.W.WaitAny(TagHeader)
	}
	return s.W.PollFrom(from, TagHeader, func(i int) {
		if i < 64 {
			runtime.Gosched()
		} else {
			time.Sleep(20 * time.Microsecond)
		}
	})
}

// recvHeader waits for and reads a header from rank from (any if < 0).
func (s *Server) recvHeader(from int, hdr []int64) (int, error) {
	k, err := s.await(from)
	if err != nil {
		return 0, err
	}
	if k >= s.Workers {
		return 0, fmt.Errorf("server: a message from rank %d, not a worker", k)
	}
	return k, s.W.RecvInt64(hdr, k, TagHeader)
}

// sendState answers a State request: parameters, then the state buffers
// in name order.
func (s *Server) sendState(k int) error {
	st := s.Opt.State()
	for _, buf := range append([][]float32{s.Params}, valuesOf(st)...) {
		if err := s.W.SendFloat32(buf, k, TagData); err != nil {
			return err
		}
	}
	return nil
}

func valuesOf(m map[string][]float32) [][]float32 {
	var out [][]float32
	for _, n := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[n])
	}
	return out
}

// serveSync is ps-sync (Sandblaster): per update a header and a gradient
// from each worker in rank order, their mean applied once, the shard back
// to each.
func (s *Server) serveSync() (Stats, error) {
	var st Stats
	n := len(s.Params)
	sum, grad := make([]float32, n), make([]float32, n)
	hdr := make([]int64, headerLen)
	for {
		if _, err := s.recvHeader(0, hdr); err != nil {
			return st, err
		}
		switch hdr[0] {
		case kindState:
			if err := s.sendState(0); err != nil {
				return st, err
			}
			continue
		case kindStop:
			for k := 1; k < s.Workers; k++ {
				if _, err := s.recvHeader(k, hdr); err != nil {
					return st, err
				}
				if hdr[0] != kindStop {
					return st, fmt.Errorf("server: worker rank %d sent request %d after worker 0 stopped", k, hdr[0])
				}
			}
			return st, nil
		case kindStep:
		default:
			return st, fmt.Errorf("server: unknown request %d from worker rank 0", hdr[0])
		}
		t, lr := int(hdr[1]), math.Float64frombits(uint64(hdr[2]))
		if s.BeforeUpdate != nil {
			if err := s.BeforeUpdate(t); err != nil {
				return st, err
			}
		}
		if err := s.W.RecvFloat32(sum, 0, TagGrad); err != nil {
			return st, err
		}
		for k := 1; k < s.Workers; k++ {
			if _, err := s.recvHeader(k, hdr); err != nil {
				return st, err
			}
			if hdr[0] != kindStep || int(hdr[1]) != t {
				return st, fmt.Errorf("server: worker rank %d is at update %d, worker 0 at %d", k, hdr[1], t)
			}
			if err := s.W.RecvFloat32(grad, k, TagGrad); err != nil {
				return st, err
			}
			for i, g := range grad {
				sum[i] += g
			}
		}
		inv := 1 / float32(s.Workers)
		for i := range sum {
			sum[i] *= inv
		}
		if !s.Opt.Step(s.Params, sum, float32(lr), t) {
			return st, fmt.Errorf("server rank %d: update %d: the averaged gradients are not finite (NaN or Inf); lower --lr", s.W.Rank(), t)
		}
		st.Updates = t
		for k := range s.Workers {
			if err := s.W.SendFloat32(s.Params, k, TagData); err != nil {
				return st, err
			}
		}
	}
}

// serveAsync is ps-async (Downpour, with stale-synchronous parallel's
// bound): each worker's gradient is applied as it arrives, scaled by
// 1/workers so that a round of all workers moves as far as one
// synchronous update, and the push is answered with the current
// parameters unless the worker is more than Staleness updates ahead of the
// slowest; then the answer waits for the slowest's next push (Staleness 0
// makes every worker see every other's gradient of the step before its
// next one).
func (s *Server) serveAsync() (Stats, error) {
	var st Stats
	W := s.Workers
	grad := make([]float32, len(s.Params))
	hdr := make([]int64, headerLen)
	clock := make([]int, W)    // pushes applied, per worker
	pulled := make([]int, W)   // version each worker last received
	pending := make([]bool, W) // a worker waiting for its answer
	version, stopped := 0, 0   // updates applied; workers done
	answer := func(k int) error {
		pending[k] = false
		pulled[k] = version
		return s.W.SendFloat32(s.Params, k, TagData)
	}
	// release answers every waiting worker the bound now allows.
	release := func() error {
		slowest := slices.Min(clock)
		for j := range W {
			if pending[j] && (s.Staleness < 0 || clock[j]-slowest <= s.Staleness) {
				if err := answer(j); err != nil {
					return err
				}
			}
		}
		return nil
	}
	inv := 1 / float32(W)
	for stopped < W {
		k, err := s.recvHeader(-1, hdr)
		if err != nil {
			return st, err
		}
		switch hdr[0] {
		case kindStop:
			stopped++
		case kindFetch:
			if err := s.W.SendFloat32(s.Params, k, TagData); err != nil {
				return st, err
			}
		case kindState:
			if err := s.sendState(k); err != nil {
				return st, err
			}
		case kindStep:
			t, lr := int(hdr[1]), math.Float64frombits(uint64(hdr[2]))
			if s.BeforeUpdate != nil {
				if err := s.BeforeUpdate(t); err != nil {
					return st, err
				}
			}
			if err := s.W.RecvFloat32(grad, k, TagGrad); err != nil {
				return st, err
			}
			stale := version - pulled[k]
			if s.Stale != nil {
				s.Stale(stale)
			}
			st.StaleMax, st.StaleSum, st.Pushes = max(st.StaleMax, stale), st.StaleSum+stale, st.Pushes+1
			for i := range grad {
				grad[i] *= inv
			}
			version++
			st.Updates = version
			if !s.Opt.Step(s.Params, grad, float32(lr), version) {
				return st, fmt.Errorf("server rank %d: update %d: the gradients are not finite (NaN or Inf); lower --lr", s.W.Rank(), version)
			}
			clock[k]++
			pending[k] = hdr[3] != 0
			if err := release(); err != nil {
				return st, err
			}
		case kindPull:
			pending[k] = true
			if err := release(); err != nil {
				return st, err
			}
		default:
			return st, fmt.Errorf("server: unknown request %d from worker rank %d", hdr[0], k)
		}
	}
	return st, nil
}
