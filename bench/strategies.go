package bench

import (
	"fmt"
	"io"
	"strings"
	"time"

	"train/mpi"
	"train/trainer"
)

// benchHook is what one run under `train bench strategies` measures on a
// trainer: the window after the warm-up steps (its wall time, the
// communication waits inside it, its steps and the mpi package's traffic
// counters over it).
type benchHook struct {
	warmup     int
	started    bool
	t0, last   time.Time
	c0, c1     mpi.Traffic
	wall, wait time.Duration
	steps      int
}

// newBenchHook counts the steps after warmup on a trainer (a server has
// none).
func newBenchHook(warmup int, trains bool) *benchHook {
	h := &benchHook{warmup: warmup}
	if warmup == 0 && trains {
		h.begin()
	}
	return h
}

func (h *benchHook) begin() {
	h.started, h.t0, h.c0, h.wait = true, time.Now(), mpi.Counted(), 0
}

// Step opens the window after the warm-up's last step and closes it after
// every later one (the loop's end is where it stays closed).
func (h *benchHook) Step(e *trainer.StepEvent) error {
	switch {
	case e.Ran == h.warmup:
		h.begin()
	case h.started:
		h.wait += e.Wait
		h.last, h.c1, h.steps = time.Now(), mpi.Counted(), e.Ran-h.warmup
		h.wall = h.last.Sub(h.t0)
	}
	return nil
}

func (h *benchHook) Log(*trainer.LogEvent)               {}
func (h *benchHook) Epoch(*trainer.EpochEvent)           {}
func (h *benchHook) Checkpoint(*trainer.CheckpointEvent) {}
func (h *benchHook) End(*trainer.EndEvent)               {}
func (h *benchHook) Close() error                        { return nil }

// StrategyBench is `train bench strategies`: the same model, data and
// batch trained Warmup + Steps steps under each strategy in turn, in one
// job.
type StrategyBench struct {
	Warmup, Steps int
	Servers       int  // K of the "ps-sync K servers" row (the other ps rows have one)
	CSV           bool // machine-readable output
}

type strategyRow struct {
	name string
	set  func(*trainer.Config)
}

// strategyRows are the rows that fit n ranks: the two allreduce
// algorithms, synchronous servers (one, and k), asynchronous servers and
// local SGD, with cfg's settings for staleness and sync interval.
func strategyRows(cfg trainer.Config, n, k int) []strategyRow {
	rows := []strategyRow{
		{"allreduce ring", func(c *trainer.Config) { c.Dist.Strategy, c.Dist.Allreduce = trainer.AllreduceStrategy, trainer.Ring }},
		{"allreduce mpi", func(c *trainer.Config) {
			c.Dist.Strategy, c.Dist.Allreduce = trainer.AllreduceStrategy, trainer.MPIAllreduce
		}},
	}
	if n >= 2 {
		rows = append(rows, strategyRow{"ps-sync 1 server", func(c *trainer.Config) { c.Dist.Strategy, c.Dist.Servers = trainer.PSSync, 1 }})
	}
	if k > 1 && k < n {
		rows = append(rows, strategyRow{fmt.Sprintf("ps-sync %d servers", k), func(c *trainer.Config) { c.Dist.Strategy, c.Dist.Servers = trainer.PSSync, k }})
	}
	if n >= 2 {
		rows = append(rows, strategyRow{fmt.Sprintf("ps-async 1 server staleness %d", cfg.Dist.Staleness),
			func(c *trainer.Config) { c.Dist.Strategy, c.Dist.Servers = trainer.PSAsync, 1 }})
	}
	rows = append(rows, strategyRow{fmt.Sprintf("local-sgd sync every %d", cfg.Dist.SyncEvery), func(c *trainer.Config) { c.Dist.Strategy = trainer.LocalSGD }})
	return rows
}

// benchStripped are the strategy options bench strategies hands to the
// rows that use them (a row never refuses the others').
var benchStripped = []string{"allreduce", "servers", "staleness", "sync-every", "bucket-mb", "overlap"}

// Strategies runs the strategy benchmark on every rank of w; rank 0
// prints one row per strategy: throughput (samples/s over all workers, the
// slowest worker's window), time per step, communication wait per step
// (mean over workers: gradient allreduce, parameter-server exchange, or
// local SGD's averaging), and bytes per rank per step from the mpi
// package's counters.
func Strategies(w *mpi.World, base trainer.Config, sb StrategyBench, out, errw io.Writer) error {
	if w.Rank() != 0 {
		out = io.Discard
	}
	if sb.Warmup < 0 || sb.Steps < 1 {
		return trainer.Agree(w, fmt.Errorf("--warmup %d --steps %d: need warmup >= 0 and steps >= 1", sb.Warmup, sb.Steps))
	}
	set := map[string]bool{}
	for k, v := range base.Set {
		set[k] = v
	}
	for _, k := range benchStripped {
		delete(set, k)
	}
	base.Set = set
	if err := trainer.Agree(w, base.Validate()); err != nil {
		return err
	}
	base = quiet(base)
	base.Optim.MaxSteps, base.Optim.Epochs = sb.Warmup+sb.Steps, 1<<20 // the schedule's lr stays at its start
	n := w.Size()
	rows := strategyRows(base, n, sb.Servers)
	var b strings.Builder
	if sb.CSV {
		fmt.Fprintln(&b, "strategy,workers,servers,samples_per_s,ms_per_step,comm_wait_ms_per_step,sent_bytes_per_rank_step,recv_bytes_per_rank_step,busiest_rank_bytes_per_step,collective_bytes_per_rank_step")
	} else {
		fmt.Fprintf(&b, "# train bench strategies: %s, %d ranks, batch %d per worker, %d warm-up + %d timed steps, data %s\n",
			base.ModelName(), n, base.Data.BatchSize, sb.Warmup, sb.Steps, base.Data.Dir)
		fmt.Fprintf(&b, "# bytes per rank per step: point-to-point as sent and received (ring and servers); MPI collectives by buffer size (MPI picks their algorithm); max: the busiest rank's sent + received\n")
		fmt.Fprintf(&b, "%-34s %7s %7s %10s %9s %10s %9s %9s %9s %9s\n", "strategy", "workers", "servers", "samples/s", "ms/step", "comm ms", "sent MB", "recv MB", "max MB", "coll MB")
	}
	for _, row := range rows {
		cfg := base
		row.set(&cfg)
		v, err := benchRow(w, cfg, sb, errw)
		if err != nil {
			return err
		}
		var workers, servers int
		var wall, wait, sent, recv, coll, busiest float64
		steps := float64(sb.Steps)
		for q := range n {
			x := v[8*q : 8*(q+1)]
			per := x[4]
			if x[0] == 1 {
				workers++
				wall, wait = max(wall, x[2]), wait+x[3]
			} else if x[1] != 1 || per == 0 {
				continue
			} else {
				servers++
			}
			sent, recv, coll = sent+x[5]/per, recv+x[6]/per, coll+x[7]/per
			busiest = max(busiest, (x[5]+x[6])/per)
		}
		if workers == 0 || wall == 0 {
			return fmt.Errorf("bench strategies: %s: no worker timed its steps", row.name)
		}
		sps := float64(workers*cfg.Data.BatchSize) * steps / wall
		ms, waitMs := wall/steps*1e3, wait/float64(workers)/steps*1e3
		mb := func(x float64) float64 { return x / float64(n) / 1e6 }
		if sb.CSV {
			fmt.Fprintf(&b, "%s,%d,%d,%.1f,%.3f,%.3f,%.1f,%.1f,%.1f,%.1f\n", row.name, workers, servers, sps, ms, waitMs, sent/float64(n), recv/float64(n), busiest, coll/float64(n))
		} else {
			fmt.Fprintf(&b, "%-34s %7d %7d %10.0f %9.2f %10.2f %9.3f %9.3f %9.3f %9.3f\n", row.name, workers, servers, sps, ms, waitMs, mb(sent), mb(recv), busiest/1e6, mb(coll))
		}
	}
	fmt.Fprint(out, b.String())
	return nil
}

// benchRow trains one row's strategy and returns, for every rank, 8
// values: trained (1 or 0), served (1 or 0), window seconds, wait seconds,
// steps (a server's: updates per worker), and the traffic sent, received
// and in collectives over the window (a server's: over its service).
func benchRow(w *mpi.World, cfg trainer.Config, sb StrategyBench, errw io.Writer) ([]float64, error) {
	s, err := trainer.NewSession(w, cfg, trainer.Options{Err: errw, Bench: true})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	h := newBenchHook(sb.Warmup, !s.Serving())
	s.AddHook(h)
	c0 := mpi.Counted()
	if err := s.Run(); err != nil {
		return nil, err
	}
	served := mpi.Counted().Sub(c0)
	n := w.Size()
	v := make([]float64, 8*n)
	o := 8 * w.Rank()
	traffic := h.c1.Sub(h.c0)
	if h.started {
		v[o], v[o+2], v[o+3], v[o+4] = 1, h.wall.Seconds(), h.wait.Seconds(), float64(h.steps)
	}
	if s.Serving() {
		v[o+1], v[o+4], traffic = 1, s.ServedUpdates(), served
	}
	v[o+5], v[o+6], v[o+7] = float64(traffic.Sent), float64(traffic.Received), float64(traffic.Collective)
	return v, w.AllreduceFloat64(v, mpi.Sum)
}
