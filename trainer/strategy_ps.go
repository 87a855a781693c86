package trainer

import (
	"fmt"
	"runtime"
	"slices"
	"time"

	"train/mpi"
	"train/optim"
	"train/ps"
)

// paramServers is what ps-sync (strategy_pssync.go) and ps-async
// (strategy_psasync.go) share: K servers hold the parameters and
// optimizer state, a contiguous shard each, and workers push gradients and
// pull parameters with package ps's protocol. The servers are the last K
// ranks, whose whole run is Serve; the world is split so that the workers'
// loop (logging, evaluation, stop checks, BatchNorm) never waits for them.
// With --colocate they are goroutines beside the workers of ranks 0..K-1
// instead, and every rank trains.
type paramServers struct {
	strategyBase
	s       *Session
	async   bool       // the servers' discipline (package ps's Server.Async)
	world   *mpi.World // every rank, before the split
	client  *ps.Client
	shards  [][2]int
	free    []func()
	served  chan error // colocated: this rank's server goroutine's result; nil if none
	stats   ps.Stats   // a server's, once it has served
	workers int
	waited  time.Duration // in exchanges with the servers, since the last Waiting
}

// Start splits the job into workers and servers (or starts colocated
// servers), once every rank holds the initial state: a server's optimizer
// starts from the broadcast state, so a resumed run continues exactly.
func (p *paramServers) Start() (bool, error) {
	s, d := p.s, &p.s.Cfg.Dist
	n := p.world.Size()
	if d.Colocate && d.Servers > n {
		return false, fmt.Errorf("--strategy %s --colocate --servers %d: need 1 to %d servers (one per rank at most)", d.Strategy, d.Servers, n)
	}
	if !d.Colocate && d.Servers >= n {
		return false, fmt.Errorf("--strategy %s --servers %d: need at least one server and one worker among the %d ranks (or --colocate)", d.Strategy, d.Servers, n)
	}
	p.shards = ps.Shards(s.Model.Params.Len(), d.Servers)
	if d.Colocate {
		return false, p.colocate()
	}
	p.workers = n - d.Servers
	server := p.world.Rank() >= p.workers
	sub, err := p.world.Split(map[bool]int{false: 0, true: 1}[server], p.world.Rank())
	if err != nil {
		return false, err
	}
	p.free = append(p.free, func() { sub.Free() })
	p.client = ps.NewClient(p.world, p.shards, p.workers, false)
	s.flight.record(sub, map[bool]string{false: "workers", true: "servers"}[server])
	if !server {
		s.W, s.Job = sub, sub // the workers' own world: the loop's collectives never involve the servers
	}
	return server, nil
}

// colocate runs shard s's server in a goroutine on rank s, for s < K, on a
// communicator of its own (a Dup of the world, so the servers' messages
// never meet the loop's collectives), with a copy of its shard: the worker
// beside it trains on its own replica. MPI runs with MPI_THREAD_MULTIPLE,
// so the goroutine's calls and the worker's may run at once.
func (p *paramServers) colocate() error {
	s := p.s
	pw, err := p.world.Dup()
	if err != nil {
		return err
	}
	p.free = append(p.free, func() { pw.Free() })
	s.flight.record(pw, "ps")
	p.workers = p.world.Size()
	p.client = ps.NewClient(pw, p.shards, p.workers, true)
	if r := p.world.Rank(); r < len(p.shards) {
		srv, err := p.server(pw, r, true)
		if err != nil {
			return err
		}
		// The server goroutine needs a P of its own while the worker's
		// goroutine sits in a blocking MPI call: with one (a rank bound to
		// one core), it waits for the runtime to notice, milliseconds.
		runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 2))
		p.served = make(chan error, 1)
		go func() {
			st, err := srv.Serve()
			p.stats = st
			p.report(r)
			if err != nil {
				// The worker beside it may be waiting for this server's
				// answer: only aborting the job frees it.
				fmt.Fprintf(s.errw, "train: rank %d: server: %v\n", r, err)
				p.world.Abort(1)
			}
			p.served <- err
		}()
	}
	return nil
}

// server builds shard k's server on w: the shard of the parameters (a
// copy when a worker trains beside it) and an optimizer for it with the
// shard of the broadcast state.
func (p *paramServers) server(w *mpi.World, k int, colocated bool) (*ps.Server, error) {
	s := p.s
	lo, hi := p.shards[k][0], p.shards[k][1]
	params := s.Model.Params.Data[lo:hi]
	if colocated {
		params = slices.Clone(params)
	}
	opt, err := optim.New(s.optCfg.Shard(lo, hi), hi-lo)
	if err != nil {
		return nil, err
	}
	full, mine := s.Opt.State(), opt.State()
	for name := range mine {
		copy(mine[name], full[name][lo:hi])
	}
	rank := p.world.Rank()
	return &ps.Server{W: w, Workers: p.workers, Params: params, Opt: opt, Async: p.async, Staleness: s.Cfg.Dist.Staleness,
		Poll: colocated, Stale: s.observeStaleness,
		BeforeUpdate: func(t int) error {
			if !colocated {
				s.prog.at(t - 1) // a server rank's step, for the flight recorder: the update it applies
			}
			return s.fault.fire(rank, t-1)
		}}, nil
}

// Serve is a server rank's run: its shard until every worker stopped.
func (p *paramServers) Serve() error {
	srv, err := p.server(p.world, p.world.Rank()-p.workers, false)
	if err != nil {
		return err
	}
	p.stats, err = srv.Serve()
	p.report(p.world.Rank())
	return err
}

// report prints what an asynchronous server saw of staleness (a
// synchronous one sees none: it has no pushes to count).
func (p *paramServers) report(rank int) {
	if p.async && p.stats.Pushes > 0 {
		fmt.Fprintf(p.s.errw, "train: rank %d: ps-async server: %d updates, staleness max %d, mean %.2f (updates by others between a worker's pull and its push)\n",
			rank, p.stats.Updates, p.stats.StaleMax, float64(p.stats.StaleSum)/float64(p.stats.Pushes))
	}
}

// where says where the servers run.
func (p *paramServers) where() string {
	if p.s.Cfg.Dist.Colocate {
		return fmt.Sprintf("beside the workers of ranks 0..%d", len(p.shards)-1)
	}
	return fmt.Sprintf("the last %d rank(s)", len(p.shards))
}

// Communicate pushes the gradient to the servers and pulls the updated
// parameters back: the servers did the update.
func (p *paramServers) Communicate(lr float64, t int) (bool, error) {
	return true, p.exchange(lr, t, true, true)
}

// exchange is one request to the servers (package ps's Client.Step),
// timed: a worker waits for the servers as an allreduce's rank waits for
// its gradients.
func (p *paramServers) exchange(lr float64, t int, push, pull bool) error {
	start := time.Now()
	par := p.s.Model.Params
	err := p.client.Step(par.Data, par.Grad, lr, t, push, pull)
	p.waited += time.Since(start)
	return err
}

// Waiting is the time spent in exchanges with the servers since the last
// call.
func (p *paramServers) Waiting() time.Duration {
	w := p.waited
	p.waited = 0
	return w
}

// BeforeSave (rank 0) fetches every server's shard of the parameters and
// the optimizer state.
func (p *paramServers) BeforeSave(map[string]string) error {
	return p.client.FetchState(p.s.Model.Params.Data, p.s.Opt.State())
}

// Finish tells the servers this worker is done; a colocated server ends
// once every worker has.
func (p *paramServers) Finish() error {
	if err := p.client.Stop(); err != nil {
		return err
	}
	if p.served != nil {
		return <-p.served
	}
	return nil
}

func (p *paramServers) Close() {
	for i := len(p.free) - 1; i >= 0; i-- {
		p.free[i]()
	}
}
