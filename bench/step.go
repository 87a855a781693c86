package bench

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"train/model"
	"train/mpi"
	"train/trainer"
)

// StepBench is `train bench step`: Warmup untimed and Steps timed
// training steps (the same step as training, through the Session: data,
// forward, backward with the gradient allreduce, update) of the model the
// configuration describes.
type StepBench struct {
	Warmup, Steps int
	// Passes prints where rank 0's timed steps went, pass by pass of the
	// CPU's thread pool (model.Passes): the time of each kind of pass and
	// the tail of it the caller waited for the other threads.
	Passes bool
	// Simulate, above 1, cuts every pass as for that many threads and runs
	// it on rank 0's one thread, timing each pass as the pool's schedule
	// would run it at that count (model.SimulateThreads): what a machine
	// with that many cores could do at best, measured on this one. It
	// prints the pass table (Passes) with the simulated times.
	Simulate int
}

// quiet is cfg for a benchmark: nothing watches, nothing is written,
// nothing is resumed.
func quiet(cfg trainer.Config) trainer.Config {
	cfg.Checkpoint = trainer.CheckpointOptions{}
	cfg.Observe = trainer.ObserveOptions{LogEvery: 1 << 30, Progress: trainer.ProgressNever, Job: cfg.Observe.Job}
	cfg.Dist.StallWarn, cfg.Dist.StallTimeout = 0, 0
	cfg.Fault = ""
	// Those options are off by the benchmark's choice, not the user's: the
	// checks of an option against the others (a --flight-dir, say from
	// TRAIN_FLIGHT_DIR, against the recorder turned off) must not see them.
	cfg.Set = maps.Clone(cfg.Set)
	for _, f := range Quietened {
		delete(cfg.Set, f)
	}
	return cfg
}

// Quietened names the options quiet turns off: `train bench` refuses
// them on its command line rather than accept and ignore them.
var Quietened = []string{"checkpoint-dir", "checkpoint-every", "checkpoint-format", "keep", "resume", "metrics-addr", "pushgateway",
	"pushgateway-every", "timeline", "log-file", "plot", "log-every", "eval-every", "progress", "flight-events", "flight-dir", "sample-log",
	"stall-warn", "stall-timeout"}

// Step runs the step benchmark on every rank; rank 0 prints. The
// yardstick, a matrix product with the same library and threads (SGEMM on
// the CPU), is measured on every rank at once, as the ranks share the
// machine during the steps.
func Step(w *mpi.World, cfg trainer.Config, sb StepBench, out io.Writer) error {
	if w.Rank() != 0 {
		out = io.Discard
	}
	if sb.Warmup < 0 || sb.Steps < 1 {
		return trainer.Agree(w, fmt.Errorf("--warmup %d --steps %d: need warmup >= 0 and steps >= 1", sb.Warmup, sb.Steps))
	}
	if sb.Passes && cfg.Device.Device == trainer.CUDA {
		return trainer.Agree(w, fmt.Errorf("--passes profiles the CPU's thread pool; with --device cuda use --gpu-profile"))
	}
	if sb.Simulate < 0 || sb.Simulate == 1 {
		return trainer.Agree(w, fmt.Errorf("--simulate-threads %d: give 2 or more threads to simulate (0: none)", sb.Simulate))
	}
	if sb.Simulate > 1 && cfg.Device.Device == trainer.CUDA {
		return trainer.Agree(w, fmt.Errorf("--simulate-threads simulates the CPU's thread pool; it does not apply to --device cuda"))
	}
	s, err := trainer.NewSession(w, quiet(cfg), trainer.Options{Err: io.Discard, Bench: true})
	if err != nil {
		return err
	}
	defer s.Close()
	cfg = s.Cfg
	if err := w.Barrier(); err != nil {
		return err
	}
	yard, short, measure := "SGEMM 1024^3", "SGEMM", func() (float64, error) { return SgemmGFLOPs(1024), nil }
	dev := s.Device()
	if dev != nil {
		yard, measure = dev.GEMM()
		short = "GPU GEMM"
	}
	g, devErr := measure() // reported after the collectives below, which every rank must reach
	gemm, gemmMin := []float64{g}, []float64{g}
	if err := w.AllreduceFloat64(gemm, mpi.Sum); err != nil {
		return err
	}
	if err := w.AllreduceFloat64(gemmMin, mpi.Min); err != nil {
		return err
	}
	sgemm := gemm[0] / float64(w.Size())
	if sb.Simulate > 1 {
		var err error
		if model.Threads() != 1 {
			err = fmt.Errorf("--simulate-threads %d runs every pass on one thread: give --threads 1 (the pool has %d)", sb.Simulate, model.Threads())
		} else if err = model.SimulateThreads(sb.Simulate); err != nil {
			err = fmt.Errorf("--simulate-threads %d: %v", sb.Simulate, err)
		} else {
			defer model.SimulateThreads(0)
		}
		if err := trainer.Agree(w, err); err != nil {
			return err
		}
		sb.Passes = true
	}

	if err := s.Steps(sb.Warmup); err != nil {
		return err
	}
	s.Waiting()
	var prof map[string]time.Duration
	if dev != nil {
		prof = dev.Profile()
		clear(prof) // the timed steps only
	}
	if err := w.Barrier(); err != nil {
		return err
	}
	if sb.Passes {
		model.ProfilePasses(true)
	}
	start := time.Now()
	if err := s.Steps(sb.Steps); err != nil {
		return err
	}
	// The steps' time before the profile is read: naming its tasks reads
	// this executable's symbol table (tens of milliseconds).
	t := []float64{time.Since(start).Seconds(), s.Waiting().Seconds(), float64(PeakRSS()), 0, float64(SharedRSS())}
	var passes []model.Pass
	var gaps []model.Gap
	if sb.Passes {
		passes, gaps = model.Passes(), model.Gaps()
		model.ProfilePasses(false)
	}
	if dev != nil {
		t[3] = float64(dev.PeakBytes())
	}
	if err := w.AllreduceFloat64(t, mpi.Max); err != nil {
		return err
	}
	b := cfg.Data.BatchSize
	_, flops := s.Model.FLOPs()
	perStep := t[0] / float64(sb.Steps)
	sps := float64(b*w.Size()) / perStep
	perRank := sps * float64(flops) / float64(w.Size()) / 1e9
	fmt.Fprintf(out, "# train bench step: %s, %d parameters, %.1f MFLOP (GEMM) per training sample; %s\n",
		cfg.ModelName(), s.Model.Params.Len(), float64(flops)/1e6, s.Data())
	bn := ""
	if len(s.Model.Params.BufferTensors) > 0 {
		bn = ", batchnorm " + cfg.Dist.BN.String()
	}
	fmt.Fprintf(out, "# %d rank(s) x batch %d, %s, allreduce %s%s; %d warm-up + %d timed steps\n",
		w.Size(), b, s.Describe(), cfg.Dist.Allreduce, bn, sb.Warmup, sb.Steps)
	fmt.Fprintf(out, "# %s on every rank at once: %.1f GFLOP/s per rank (slowest %.1f)\n", yard, sgemm, gemmMin[0])
	if pos := s.Model.Positions(); pos > 1 {
		tps := sps * float64(pos)
		model := tps * s.Model.FLOPsPerToken() / float64(w.Size()) / 1e9
		fmt.Fprintf(out, "tokens/s %.1f\nMFU %.3f (%.1f model GFLOP/s per rank, at 6N + 12 L C T = %.1f MFLOP per token, over %s's %.1f)\n",
			tps, model/sgemm, model, s.Model.FLOPsPerToken()/1e6, short, sgemm)
	}
	fmt.Fprintf(out, "samples/s %.1f\nms/step %.2f (slowest rank; %.2f of it waiting for gradients)\nGFLOP/s per rank %.1f\nfraction of %s %.2f\npeak RSS per rank %.0f MiB\n",
		sps, perStep*1e3, t[1]/float64(sb.Steps)*1e3, perRank, short, perRank/sgemm, t[2]/(1<<20))
	if t[4] > 0 {
		fmt.Fprintf(out, "shared memory in that RSS, per rank %.0f MiB (the gradient segment the host's ranks reduce through: counted in every rank that touched a page, held once)\n", t[4]/(1<<20))
	}
	if dev != nil {
		fmt.Fprintf(out, "peak device memory per rank %.0f MiB (train's allocations; cuDNN's and cuBLAS's own not counted)\n", t[3]/(1<<20))
	}
	if sb.Simulate > 1 {
		// Every pass's units on this thread (Work) and the pass at the
		// simulated count (Total); a pass of one unit is the same in both.
		var work, at time.Duration
		for _, p := range passes {
			work, at = work+p.Work, at+p.Total
		}
		per := func(d time.Duration) float64 { return d.Seconds() / float64(sb.Steps) }
		outside := perStep - per(work)
		sim := outside + per(at)
		fmt.Fprintf(out, "# --simulate-threads %d (rank 0): the passes, cut for %d threads, ran %.2f ms a step on this thread; by the pool's schedule %d threads run them in %.2f ms (%.2fx), with nothing for waking the threads or sharing memory, and this core's caches for all of them: a step at %d threads at best %.2f ms, %.1f samples/s, with what ran outside the passes (%.2f ms) on one thread as here\n",
			sb.Simulate, sb.Simulate, per(work)*1e3, sb.Simulate, per(at)*1e3, per(work)/per(at), sb.Simulate, sim*1e3, float64(b*w.Size())/sim, outside*1e3)
		perStep = sim
	}
	if sb.Passes {
		printPasses(out, passes, sb.Steps, perStep, sb.Simulate > 1)
		printGaps(out, gaps, sb.Steps)
	}
	if len(prof) > 0 {
		names := slices.SortedFunc(maps.Keys(prof), func(a, b string) int { return cmp.Compare(prof[b], prof[a]) })
		var total time.Duration
		for _, k := range names {
			total += prof[k]
		}
		fmt.Fprintf(out, "# --gpu-profile (rank 0; every layer fenced by synchronisation, so the step above is slower): %.2f ms per step in layers\n", total.Seconds()*1e3/float64(sb.Steps))
		for _, k := range names {
			fmt.Fprintf(out, "#   %-14s %7.3f ms/step\n", k, prof[k].Seconds()*1e3/float64(sb.Steps))
		}
	}
	return devErr
}

// gapRows is how many of the longest gaps --passes prints.
const gapRows = 12

// printGaps is --passes' second table: the caller's time between passes,
// by the pair of passes around it (model.Gap), the longest first. It is
// where the serial work of a step sits, which a rank's threads do not
// shorten. The time before the timed steps' first pass and after their
// last one is not in it.
func printGaps(out io.Writer, gaps []model.Gap, steps int) {
	var total time.Duration
	for _, g := range gaps {
		total += g.Time
	}
	per := func(d time.Duration) float64 { return d.Seconds() * 1e3 / float64(steps) }
	fmt.Fprintf(out, "# --passes: %.2f ms per step between passes (the caller's serial work), in %d places; the longest %d:\n", per(total), len(gaps), min(gapRows, len(gaps)))
	fmt.Fprintf(out, "#   %-30s %-30s %9s %9s\n", "after (units)", "before (units)", "per step", "ms/step")
	for _, g := range gaps[:min(gapRows, len(gaps))] {
		fmt.Fprintf(out, "#   %-30s %-30s %9.1f %9.3f\n", fmt.Sprintf("%s (%d)", g.From, g.FromUnits), fmt.Sprintf("%s (%d)", g.To, g.ToUnits),
			float64(g.Count)/float64(steps), per(g.Time))
	}
}

// printPasses is --passes' table: rank 0's passes over the timed steps,
// per step, the longest first; simulated, each pass's time at the
// simulated count, its units' time on the one thread, and the ratio.
// busy is the threads' time in their chunks summed over them (thread-ms
// a step: against one thread's ms/step, the work a thread count added),
// late a worker's mean delay from a pass's start to its first chunk.
func printPasses(out io.Writer, passes []model.Pass, steps int, perStep float64, simulated bool) {
	var total, wait, busy, late time.Duration
	n, workers := 0, 0
	for _, p := range passes {
		total += p.Total
		wait += p.Wait
		busy += p.Busy
		late += p.Late
		n += p.Count
		workers += p.Workers
	}
	per := func(d time.Duration) float64 { return d.Seconds() * 1e3 / float64(steps) }
	lateUs := func(d time.Duration, w int) float64 {
		if w == 0 {
			return 0
		}
		return d.Seconds() * 1e6 / float64(w)
	}
	fmt.Fprintf(out, "# --passes (rank 0; a pass is one parallel region of the thread pool, model/par.c; products made in one call count as t_gemm_rows of 1 unit): %.2f ms per step in %d passes, %.2f of it waiting at the passes' ends; %.2f outside them; %.2f thread-ms a step in the threads' chunks (busy), a worker's first chunk %.1f us after its pass's start (late)\n",
		per(total), n/steps, per(wait), perStep*1e3-per(total), per(busy), lateUs(late, workers))
	head := fmt.Sprintf("#   %-22s %6s %9s %9s %9s %6s %9s %7s", "task", "units", "per step", "ms/step", "waiting", "share", "busy", "late us")
	if simulated {
		head += fmt.Sprintf(" %9s %7s", "on one", "speedup")
	}
	fmt.Fprintln(out, head)
	for _, p := range passes {
		share := 0.0
		if p.Total > 0 {
			share = 100 * p.Wait.Seconds() / p.Total.Seconds()
		}
		row := fmt.Sprintf("#   %-22s %6d %9.1f %9.3f %9.3f %5.1f%% %9.3f %7.1f", p.Task, p.Units, float64(p.Count)/float64(steps),
			per(p.Total), per(p.Wait), share, per(p.Busy), lateUs(p.Late, p.Workers))
		if simulated && p.Total > 0 {
			row += fmt.Sprintf(" %9.3f %7.2f", per(p.Work), p.Work.Seconds()/p.Total.Seconds())
		}
		fmt.Fprintln(out, row)
	}
}
