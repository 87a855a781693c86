package trainer

// Synchronous parameter servers (--strategy ps-sync; Sandblaster, TF's
// SyncReplicasOptimizer): the last --servers ranks hold the parameters and
// optimizer state, each a contiguous shard of the flat buffer; every step
// each worker pushes its gradient shard to each server and pulls the
// updated shard back, and a server updates once it has every worker's
// gradient for the step. Workers are the first ranks, so rank 0 is a
// worker holding a full replica: it logs and checkpoints as usual, after
// asking the servers for their optimizer state.

import (
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"time"

	"train/data"
	"train/mpi"
	"train/optim"
)

const (
	// Each direction has its own tags: a colocated worker and the server
	// beside it send to and receive from the same rank, and a gradient on
	// its way to the server must never match the worker's receive of the
	// reply (MPI matches on source, tag and communicator only).
	tagPSHeader = 0x5053 // worker -> server: kind, update, lr
	tagPSData   = 0x5054 // server -> worker: parameters, optimizer state
	tagPSGrad   = 0x5055 // worker -> server: a gradient shard

	psStop  = 0 // training is over
	psStep  = 1 // a gradient follows; the updated shard goes back
	psState = 2 // (rank 0) send the shard's parameters and optimizer state
	psFetch = 3 // (ps-async) send the shard's current parameters now
	psPull  = 4 // (ps-async) send them once the staleness bound allows

	// A header is kind, update number, learning rate (float64 bits) and,
	// for psStep, whether the worker wants the parameters back.
	psHeaderLen = 4
)

// psClient is a worker's view of the servers.
type psClient struct {
	world     *mpi.World // every rank: the servers are ranks workers..size-1, or 0..K-1 colocated
	workers   int        // ranks 0..workers-1
	shards    [][2]int   // server s holds [shards[s][0], shards[s][1])
	colocated bool
	served    chan error // colocated: the result of this rank's server goroutine; nil if none
}

// await returns once a message with tag from rank from (any rank if from
// < 0) is waiting, and its source. A separate server blocks in MPI; a
// colocated one polls with short sleeps instead, so that its thread leaves
// the core to the worker beside it (MPI waits by spinning).
func (ps *psClient) await(from, tag int) (int, error) {
	if !ps.colocated {
		if from >= 0 {
			return from, nil // the blocking receive that follows waits
		}
		return ps.world.WaitAny(tag)
	}
	for i := 0; ; i++ {
		src, ok, err := ps.world.ProbeFrom(from, tag)
		if err != nil || ok {
			return src, err
		}
		if i < 64 {
			runtime.Gosched()
		} else {
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// server is the rank of shard s's server.
func (ps *psClient) server(s int) int {
	if ps.colocated {
		return s
	}
	return ps.workers + s
}

// psShards cuts n elements into k contiguous shards whose lengths differ
// by at most one (byte-balanced: every element is 4 bytes).
func psShards(n, k int) [][2]int {
	out := make([][2]int, k)
	for s := range k {
		out[s] = [2]int{s * n / k, (s + 1) * n / k}
	}
	return out
}

// startPS splits the job into workers and servers once every rank holds the
// initial state. On a worker it makes r.w the workers' World, so the
// loop's collectives (logging, evaluation, stop checks, BatchNorm) never
// wait for the servers, and redraws the data shards for the workers. It
// reports whether this rank is a server.
func (r *run) startPS() (bool, error) {
	c := &r.cfg
	world := r.w
	n := world.Size()
	if c.Colocate && (c.Servers < 1 || c.Servers > n) {
		return false, fmt.Errorf("--strategy %s --colocate --servers %d: need 1 to %d servers (one per rank at most)", c.Strategy, c.Servers, n)
	}
	if !c.Colocate && (c.Servers < 1 || c.Servers >= n) {
		return false, fmt.Errorf("--strategy %s --servers %d: need at least one server and one worker among the %d ranks (or --colocate)", c.Strategy, c.Servers, n)
	}
	if c.Colocate {
		return false, r.startColocated()
	}
	workers := c.trainers(n)
	server := world.Rank() >= workers
	color := 0
	if server {
		color = 1
	}
	sub, err := world.Split(color, world.Rank())
	if err != nil {
		return false, err
	}
	ps := &psClient{world: world, workers: workers, shards: psShards(r.model.Params.Len(), c.Servers)}
	r.ps = ps
	r.freePS = func() { sub.Free() }
	if server {
		return true, nil
	}
	r.w = sub
	if r.bn != nil {
		if r.bn, err = sub.Dup(); err != nil {
			return false, err
		}
		bn := r.bn
		r.freePS = func() { bn.Free(); sub.Free() }
	}
	r.sampler = data.Sampler{N: r.train.N, Batch: c.BatchSize, Rank: sub.Rank(), Size: sub.Size(), Seed: c.Seed}
	spe := r.sampler.StepsPerEpoch()
	if spe == 0 {
		return false, fmt.Errorf("--batch-size %d: too large for %d workers' shards", c.BatchSize, sub.Size())
	}
	r.sched.Total, r.sched.StepSize = c.Epochs*spe, c.LRStepEpochs*spe
	if c.LRScaling == "linear" {
		r.sched.Base = c.LR * float64(sub.Size())
	}
	return false, nil
}

// startColocated places the servers beside the workers (--colocate):
// every rank trains, and ranks 0..K-1 also run shard s = rank's server in
// a goroutine, on a communicator of their own (a Dup of the world, so the
// servers' messages never meet the loop's collectives). The server keeps a
// copy of its shard: the worker beside it has its own replica. MPI runs
// with MPI_THREAD_MULTIPLE, so the goroutine's blocking calls and the
// worker's may run at once.
func (r *run) startColocated() error {
	c := &r.cfg
	pw, err := r.w.Dup()
	if err != nil {
		return err
	}
	ps := &psClient{world: pw, workers: r.w.Size(), shards: psShards(r.model.Params.Len(), c.Servers), colocated: true}
	r.ps = ps
	r.freePS = func() { pw.Free() }
	if s := r.w.Rank(); s < c.Servers {
		// The server goroutine needs a P of its own while the worker's
		// goroutine sits in a blocking MPI call: with one (a rank bound to
		// one core), it waits for the runtime to notice, milliseconds.
		runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 2))
		ps.served = make(chan error, 1)
		go func() {
			err := r.serve()
			if err != nil {
				// The worker beside it may be waiting for this server's
				// answer: only aborting the job frees it.
				fmt.Fprintf(r.errw, "train: rank %d: server: %v\n", r.w.Rank(), err)
				r.w.Abort(1)
			}
			ps.served <- err
		}()
	}
	return nil
}

// exchange pushes this worker's gradient (t is the update's number), if
// push, and pulls the servers' updated parameters, if pull (ps-sync always
// does both; ps-async's --push-every and --fetch-every thin them out).
// Workers send to the servers in the same order and servers take workers
// in rank order, so no cycle of waits can form.
func (ps *psClient) exchange(params, grads []float32, lr float64, t int, push, pull bool) error {
	hdr := []int64{psStep, int64(t), int64(math.Float64bits(lr)), 0}
	if pull {
		hdr[3] = 1
	}
	if !push {
		hdr = []int64{psPull, int64(t), 0, 0}
		if !pull {
			return nil
		}
	}
	for s, sh := range ps.shards {
		if err := ps.world.SendInt64(hdr, ps.server(s), tagPSHeader); err != nil {
			return err
		}
		if !push {
			continue
		}
		if err := ps.world.SendFloat32(grads[sh[0]:sh[1]], ps.server(s), tagPSGrad); err != nil {
			return err
		}
	}
	if !pull {
		return nil
	}
	for s, sh := range ps.shards {
		if err := ps.world.RecvFloat32(params[sh[0]:sh[1]], ps.server(s), tagPSData); err != nil {
			return fmt.Errorf("from server rank %d: %w", ps.server(s), err)
		}
	}
	return nil
}

// fetchState (rank 0, before a checkpoint) copies every server's shard of
// the parameters and optimizer state into the local buffers.
func (ps *psClient) fetchState(params []float32, state map[string][]float32) error {
	names := slices.Sorted(maps.Keys(state))
	for s, sh := range ps.shards {
		if err := ps.world.SendInt64([]int64{psState, 0, 0, 0}, ps.server(s), tagPSHeader); err != nil {
			return err
		}
		for _, buf := range append([][]float32{params}, mapValues(state, names)...) {
			if err := ps.world.RecvFloat32(buf[sh[0]:sh[1]], ps.server(s), tagPSData); err != nil {
				return fmt.Errorf("state from server rank %d: %w", ps.server(s), err)
			}
		}
	}
	return nil
}

// fetch pulls every server's current parameters (ps-async, once every
// worker has pushed all it will: the replicas then agree).
func (ps *psClient) fetch(params []float32) error {
	for s, sh := range ps.shards {
		if err := ps.world.SendInt64([]int64{psFetch, 0, 0, 0}, ps.server(s), tagPSHeader); err != nil {
			return err
		}
		if err := ps.world.RecvFloat32(params[sh[0]:sh[1]], ps.server(s), tagPSData); err != nil {
			return fmt.Errorf("from server rank %d: %w", ps.server(s), err)
		}
	}
	return nil
}

// stop tells every server that this worker is done.
func (ps *psClient) stop() error {
	for s := range ps.shards {
		if err := ps.world.SendInt64([]int64{psStop, 0, 0, 0}, ps.server(s), tagPSHeader); err != nil {
			return err
		}
	}
	return nil
}

func mapValues(m map[string][]float32, names []string) [][]float32 {
	out := make([][]float32, len(names))
	for i, n := range names {
		out[i] = m[n]
	}
	return out
}

// serveAsync is an asynchronous server (--strategy ps-async, Downpour):
// it applies each worker's gradient as it arrives (scaled by 1/workers, so
// a round of all workers moves as far as one synchronous update) and
// answers the push with the current parameters, unless the worker is more
// than --staleness updates ahead of the slowest, in which case the answer
// waits (stale-synchronous parallel; --staleness 0 makes every worker see
// every other's gradient of the step before its next one).
func (r *run) serveAsync(params []float32, opt optim.Optimizer, mine map[string][]float32, names []string) error {
	ps, w := r.ps, r.ps.world
	W := ps.workers
	grad := make([]float32, len(params))
	hdr := make([]int64, psHeaderLen)
	clock := make([]int, W)    // pushes applied per worker
	pulled := make([]int, W)   // version each worker last received
	pending := make([]bool, W) // a worker waiting for its answer
	version, stopped := 0, 0   // updates applied; workers done
	var staleMax, staleSum, pushes int
	minClock := func() int {
		m := clock[0]
		for _, c := range clock {
			m = min(m, c)
		}
		return m
	}
	answer := func(k int) error {
		pending[k] = false
		pulled[k] = version
		return w.SendFloat32(params, k, tagPSData)
	}
	// release answers every waiting worker the bound now allows.
	release := func() error {
		m := minClock()
		for j := range W {
			if pending[j] && (r.cfg.Staleness < 0 || clock[j]-m <= r.cfg.Staleness) {
				if err := answer(j); err != nil {
					return err
				}
			}
		}
		return nil
	}
	inv := 1 / float32(W)
	for stopped < W {
		k, err := ps.await(-1, tagPSHeader)
		if err != nil {
			return err
		}
		if k >= W {
			return fmt.Errorf("server: a message from rank %d, not a worker", k)
		}
		if err := w.RecvInt64(hdr, k, tagPSHeader); err != nil {
			return err
		}
		switch hdr[0] {
		case psStop:
			stopped++
		case psFetch:
			if err := w.SendFloat32(params, k, tagPSData); err != nil {
				return err
			}
		case psState:
			for _, buf := range append([][]float32{params}, mapValues(mine, names)...) {
				if err := w.SendFloat32(buf, k, tagPSData); err != nil {
					return err
				}
			}
		case psStep:
			t, lr := int(hdr[1]), math.Float64frombits(uint64(hdr[2]))
			if err := r.fault.fire(r.w.Rank(), t-1); err != nil {
				return err
			}
			if err := w.RecvFloat32(grad, k, tagPSGrad); err != nil {
				return err
			}
			stale := version - pulled[k]
			if r.met != nil {
				r.met.psStaleness.Observe(float64(stale))
			}
			staleMax, staleSum, pushes = max(staleMax, stale), staleSum+stale, pushes+1
			for i := range grad {
				grad[i] *= inv
			}
			version++
			if r.bench != nil && !ps.colocated {
				r.bench.steps = version / W // updates per worker, on average
			}
			if !opt.Step(params, grad, float32(lr), version) {
				return fmt.Errorf("server rank %d: update %d: the gradients are not finite (NaN or Inf); lower --lr", r.w.Rank(), version)
			}
			clock[k]++
			pending[k] = hdr[3] != 0
			if err := release(); err != nil {
				return err
			}
		case psPull:
			pending[k] = true
			if err := release(); err != nil {
				return err
			}
		default:
			return fmt.Errorf("server: unknown request %d from worker rank %d", hdr[0], k)
		}
	}
	if pushes > 0 {
		fmt.Fprintf(r.errw, "train: rank %d: ps-async server: %d updates, staleness max %d, mean %.2f (updates by others between a worker's pull and its push)\n",
			r.w.Rank(), version, staleMax, float64(staleSum)/float64(pushes))
	}
	return nil
}

// serve is a server's whole run: it keeps its shard of the parameters and
// an optimizer for the shard (started from the broadcast state, so resumed
// runs continue exactly), and answers the workers until all have stopped.
func (r *run) serve() error {
	ps := r.ps
	s := r.w.Rank() - ps.workers
	if ps.colocated {
		s = r.w.Rank()
	}
	lo, hi := ps.shards[s][0], ps.shards[s][1]
	params := r.model.Params.Data[lo:hi]
	if ps.colocated {
		params = slices.Clone(params) // the worker beside it trains on the model's buffer
	}
	opt, err := optim.New(r.cfg.optimConfig(), hi-lo)
	if err != nil {
		return err
	}
	full := r.opt.State()
	names := slices.Sorted(maps.Keys(full))
	mine := opt.State()
	for _, n := range names {
		copy(mine[n], full[n][lo:hi])
	}
	if r.bench != nil && !ps.colocated {
		r.bench.server = true
		start := mpi.Counted()
		defer func() { r.bench.traffic = mpi.Counted().Sub(start) }()
	}
	if r.cfg.Strategy == "ps-async" {
		return r.serveAsync(params, opt, mine, names)
	}
	sum, grad := make([]float32, hi-lo), make([]float32, hi-lo)
	hdr := make([]int64, psHeaderLen)
	w := ps.world
	for {
		if _, err := ps.await(0, tagPSHeader); err != nil {
			return err
		}
		if err := w.RecvInt64(hdr, 0, tagPSHeader); err != nil {
			return err
		}
		switch hdr[0] {
		case psState:
			for _, buf := range append([][]float32{params}, mapValues(mine, names)...) {
				if err := w.SendFloat32(buf, 0, tagPSData); err != nil {
					return err
				}
			}
			continue
		case psStop:
			for k := 1; k < ps.workers; k++ {
				if _, err := ps.await(k, tagPSHeader); err != nil {
					return err
				}
				if err := w.RecvInt64(hdr, k, tagPSHeader); err != nil {
					return err
				}
				if hdr[0] != psStop {
					return fmt.Errorf("server: worker rank %d sent %d after worker 0 stopped", k, hdr[0])
				}
			}
			return nil
		case psStep:
		default:
			return fmt.Errorf("server: unknown request %d from worker rank 0", hdr[0])
		}
		t, lr := int(hdr[1]), math.Float64frombits(uint64(hdr[2]))
		if err := r.fault.fire(r.w.Rank(), t-1); err != nil { // tests: a failing server
			return err
		}
		if err := w.RecvFloat32(sum, 0, tagPSGrad); err != nil {
			return err
		}
		for k := 1; k < ps.workers; k++ {
			if _, err := ps.await(k, tagPSHeader); err != nil {
				return err
			}
			if err := w.RecvInt64(hdr, k, tagPSHeader); err != nil {
				return err
			}
			if hdr[0] != psStep || int(hdr[1]) != t {
				return fmt.Errorf("server: worker rank %d is at update %d, worker 0 at %d", k, hdr[1], t)
			}
			if err := w.RecvFloat32(grad, k, tagPSGrad); err != nil {
				return err
			}
			for i, g := range grad {
				sum[i] += g
			}
		}
		inv := 1 / float32(ps.workers)
		for i := range sum {
			sum[i] *= inv
		}
		if r.bench != nil && !ps.colocated {
			r.bench.steps = t
		}
		if !opt.Step(params, sum, float32(lr), t) {
			return fmt.Errorf("server rank %d: update %d: the averaged gradients are not finite (NaN or Inf); lower --lr", r.w.Rank(), t)
		}
		for k := range ps.workers {
			if err := w.SendFloat32(params, k, tagPSData); err != nil {
				return err
			}
		}
	}
}
