package trainer

import (
	"fmt"
	"io"
	"strings"
	"time"

	"train/mpi"
)

// benchCounters is what one run under `train bench strategies` measures on
// its rank: on a worker the timed window after the warm-up steps, on a
// parameter server its whole service (every update moves the same bytes,
// so the per-step figure does not depend on where the window starts).
type benchCounters struct {
	warmup     int
	started    bool // a worker that reached its timed window
	server     bool
	t0         time.Time
	c0         mpi.Traffic
	wall, wait time.Duration // the window, and the communication waits inside it
	steps      int           // timed steps (worker) or updates served (server)
	traffic    mpi.Traffic
}

func (b *benchCounters) begin() {
	b.started, b.t0, b.c0, b.wait = true, time.Now(), mpi.Counted(), 0
}

// end closes the window after done steps of the run.
func (b *benchCounters) end(done int) {
	if !b.started {
		return
	}
	b.wall, b.traffic, b.steps = time.Since(b.t0), mpi.Counted().Sub(b.c0), done-b.warmup
}

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
	set  func(*Config)
}

// strategyRows are the rows that fit n ranks: the two allreduce
// algorithms, synchronous servers (one, and k), asynchronous servers and
// local SGD, with cfg's settings for staleness and sync interval.
func strategyRows(cfg Config, n, k int) []strategyRow {
	rows := []strategyRow{
		{"allreduce ring", func(c *Config) { c.Strategy, c.Allreduce = "allreduce", "ring" }},
		{"allreduce mpi", func(c *Config) { c.Strategy, c.Allreduce = "allreduce", "mpi" }},
	}
	if n >= 2 {
		rows = append(rows, strategyRow{"ps-sync 1 server", func(c *Config) { c.Strategy, c.Servers = "ps-sync", 1 }})
	}
	if k > 1 && k < n {
		rows = append(rows, strategyRow{fmt.Sprintf("ps-sync %d servers", k), func(c *Config) { c.Strategy, c.Servers = "ps-sync", k }})
	}
	if n >= 2 {
		rows = append(rows, strategyRow{fmt.Sprintf("ps-async 1 server staleness %d", cfg.Staleness),
			func(c *Config) { c.Strategy, c.Servers = "ps-async", 1 }})
	}
	rows = append(rows, strategyRow{fmt.Sprintf("local-sgd sync every %d", cfg.SyncEvery), func(c *Config) { c.Strategy = "local-sgd" }})
	return rows
}

// BenchStrategies runs the strategy benchmark on every rank of w; rank 0
// prints one row per strategy: throughput (samples/s over all workers, the
// slowest worker's window), time per step, communication wait per step
// (mean over workers: gradient allreduce, parameter-server exchange, or
// local SGD's averaging), and bytes per rank per step from the mpi
// package's counters.
func BenchStrategies(w *mpi.World, base Config, sb StrategyBench, out, errw io.Writer) error {
	if w.Rank() != 0 {
		out = io.Discard
	}
	if sb.Warmup < 0 || sb.Steps < 1 {
		return agree(w, fmt.Errorf("--warmup %d --steps %d: need warmup >= 0 and steps >= 1", sb.Warmup, sb.Steps))
	}
	if err := agree(w, base.Validate()); err != nil {
		return err
	}
	base.MaxSteps, base.Epochs = sb.Warmup+sb.Steps, 1<<20 // the schedule's lr stays at its start
	base.CheckpointDir, base.Resume, base.LogFile, base.Plot, base.Timeline = "", false, "", "", ""
	base.MetricsAddr, base.Pushgateway, base.StallWarn, base.StallTimeout = "", "", 0, 0
	base.Progress, base.Fault = "never", ""
	n := w.Size()
	rows := strategyRows(base, n, sb.Servers)
	var b strings.Builder
	if sb.CSV {
		fmt.Fprintln(&b, "strategy,workers,servers,samples_per_s,ms_per_step,comm_wait_ms_per_step,sent_bytes_per_rank_step,recv_bytes_per_rank_step,busiest_rank_bytes_per_step,collective_bytes_per_rank_step")
	} else {
		fmt.Fprintf(&b, "# train bench strategies: %s, %d ranks, batch %d per worker, %d warm-up + %d timed steps, data %s\n",
			base.modelName(), n, base.BatchSize, sb.Warmup, sb.Steps, base.DataDir)
		fmt.Fprintf(&b, "# bytes per rank per step: point-to-point as sent and received (ring and servers); MPI collectives by buffer size (MPI picks their algorithm); max: the busiest rank's sent + received\n")
		fmt.Fprintf(&b, "%-34s %7s %7s %10s %9s %10s %9s %9s %9s %9s\n", "strategy", "workers", "servers", "samples/s", "ms/step", "comm ms", "sent MB", "recv MB", "max MB", "coll MB")
	}
	for _, row := range rows {
		cfg := base
		row.set(&cfg)
		r := &run{w: w, cfg: cfg, rep: quiet(), errw: errw, lastSaved: -1, bench: &benchCounters{warmup: sb.Warmup}}
		if err := r.job(io.Discard); err != nil {
			return err
		}
		const k = 8
		v := make([]float64, k*n)
		bc, o := r.bench, k*w.Rank()
		if bc.started {
			v[o] = 1
		}
		if bc.server {
			v[o+1] = 1
		}
		v[o+2], v[o+3], v[o+4] = bc.wall.Seconds(), bc.wait.Seconds(), float64(bc.steps)
		v[o+5], v[o+6], v[o+7] = float64(bc.traffic.Sent), float64(bc.traffic.Received), float64(bc.traffic.Collective)
		if err := w.AllreduceFloat64(v, mpi.Sum); err != nil {
			return err
		}
		var workers, servers int
		var wall, wait, sent, recv, coll, busiest float64
		steps := float64(sb.Steps)
		for q := range n {
			x := v[k*q : k*(q+1)]
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
		sps := float64(workers*cfg.BatchSize) * steps / wall
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
