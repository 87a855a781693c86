package trainer

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"train/runlog"
)

// reportHook is rank 0's account of the loop: the progress bar every
// step, a line and a record per log step, per evaluation and per
// checkpoint, the closing lines, and --plot (other ranks' reporter writes
// nothing).
type reportHook struct {
	hookBase
	s        *Session
	rep      *reporter
	lastLoss float64
}

func newReportHook(s *Session) (Hook, error) { return &reportHook{s: s, rep: s.rep}, nil }

func (h *reportHook) Step(e *StepEvent) error {
	if !h.rep.tty {
		return nil
	}
	sps := float64(e.Ran) * float64(e.Samples) / e.StepTime.Seconds()
	if h.lastLoss == 0 {
		h.lastLoss = e.Loss
	}
	h.rep.progress(e.Step, e.Total, e.Epoch, h.s.Cfg.Optim.Epochs, h.lastLoss, sps,
		time.Duration(float64(e.Total-e.Step)*float64(e.Samples)/sps*float64(time.Second)))
	return nil
}

func (h *reportHook) Log(e *LogEvent) {
	h.lastLoss = e.Loss
	h.rep.say("epoch %d/%d step %d (%d/%d) loss %.4f acc %.2f%% lr %.4g %.0f samples/s, gradient wait %.2f ms/step\n",
		e.Epoch, h.s.Cfg.Optim.Epochs, e.Step, e.StepInEpoch, e.StepsPerEpoch, e.Loss, 100*e.Accuracy, e.LR, e.SamplesPerSecond, e.WaitMs)
	h.rep.record(runlog.Record{Type: "step", Epoch: e.Epoch, Step: e.Step, Loss: runlog.F(e.Loss),
		Accuracy: runlog.F(e.Accuracy), LR: runlog.F(e.LR), SamplesPerSecond: runlog.F(e.SamplesPerSecond), GradientWaitMs: runlog.F(e.WaitMs)})
}

func (h *reportHook) Epoch(e *EpochEvent) {
	what := "done"
	if !e.Done {
		what = "stopped"
	}
	if h.s.Model.Positions() > 1 { // a language model: the validation split, its perplexity, next-token accuracy
		h.rep.say("epoch %d/%d %s step %d: train loss %.4f acc %.2f%%, val loss %.4f (perplexity %.2f) acc %.2f%%, %.1f s\n",
			e.Epoch, h.s.Cfg.Optim.Epochs, what, e.Step, e.TrainLoss, 100*e.TrainAccuracy, e.TestLoss, math.Exp(e.TestLoss), 100*e.TestAcc, e.Took.Seconds())
	} else {
		h.rep.say("epoch %d/%d %s step %d: train loss %.4f acc %.2f%%, test loss %.4f acc %.2f%%, %.1f s\n",
			e.Epoch, h.s.Cfg.Optim.Epochs, what, e.Step, e.TrainLoss, 100*e.TrainAccuracy, e.TestLoss, 100*e.TestAcc, e.Took.Seconds())
	}
	h.rep.record(runlog.Record{Type: "epoch", Epoch: e.Epoch, Step: e.Step,
		TrainLoss: runlog.F(e.TrainLoss), TrainAccuracy: runlog.F(e.TrainAccuracy),
		TestLoss: runlog.F(e.TestLoss), TestAccuracy: runlog.F(e.TestAcc), Seconds: runlog.F(e.Took.Seconds())})
}

func (h *reportHook) Eval(e *EvalEvent) {
	if h.s.Model.Positions() > 1 {
		h.rep.say("step %d: val loss %.4f (perplexity %.2f) acc %.2f%%, %.1f s\n", e.Step, e.TestLoss, math.Exp(e.TestLoss), 100*e.TestAcc, e.Took.Seconds())
	} else {
		h.rep.say("step %d: test loss %.4f acc %.2f%%, %.1f s\n", e.Step, e.TestLoss, 100*e.TestAcc, e.Took.Seconds())
	}
	h.rep.record(runlog.Record{Type: "eval", Epoch: e.Epoch, Step: e.Step, TestLoss: runlog.F(e.TestLoss), TestAccuracy: runlog.F(e.TestAcc),
		Seconds: runlog.F(e.Took.Seconds())})
}

func (h *reportHook) Checkpoint(e *CheckpointEvent) {
	h.rep.say("checkpoint: %s (%.0f ms)\n", e.Path, float64(e.Took.Microseconds())/1000)
}

func (h *reportHook) End(e *EndEvent) {
	if n := e.Ran; n > 0 {
		sps := float64(n) * float64(e.Global) / e.StepTime.Seconds()
		h.rep.record(runlog.Record{Type: "done", Step: e.Step, SamplesPerSecond: runlog.F(sps)})
		h.rep.say("throughput: %d steps x %d samples in %.2f s of training steps: %.0f samples/s, %.1f GFLOP/s per rank; %.2f ms per step, %.2f ms of it waiting for gradients (rank 0)\n",
			n, e.Global, e.StepTime.Seconds(), sps, sps*float64(e.FLOPsPerSample)/float64(e.Ranks)/1e9,
			e.StepTime.Seconds()*1e3/float64(n), e.WaitTime.Seconds()*1e3/float64(n))
	}
	if e.StopBy != "" {
		saved := "no --checkpoint-dir: nothing saved"
		if e.CheckpointDir != "" {
			saved = fmt.Sprintf("checkpoint written to %s; continue with --resume", e.CheckpointDir)
		}
		h.rep.say("stopped by %s at step %d: %s\n", e.StopBy, e.Step, saved)
	}
	if e.Parts > 1 {
		h.rep.say("done: step %d, parameters identical on all %d rank(s) of each of %d parts (crc32c %08x, rank 0's part)\n", e.Step, e.Ranks, e.Parts, e.CRC)
	} else {
		h.rep.say("done: step %d, parameters identical on all %d rank(s) (crc32c %08x)\n", e.Step, e.Ranks, e.CRC)
	}
	c := &h.s.Cfg
	if c.Observe.Plot == "" || h.s.Job.Rank() != 0 {
		return
	}
	recs := h.rep.records
	if c.Checkpoint.Resume && c.Observe.LogFile != "" {
		// The log holds the runs before this one too: plot them all.
		if all, err := runlog.ReadFile(c.Observe.LogFile); err == nil {
			recs = all
		}
	}
	if err := runlog.Plot(recs, c.Observe.Plot, 1200, 900); err != nil {
		fmt.Fprintf(h.s.errw, "train: rank 0: --plot %s: %v\n", c.Observe.Plot, err)
	} else {
		h.rep.say("plot: %s\n", c.Observe.Plot)
	}
}

// reporter is rank 0's account of the run: log lines, a live progress bar
// when stdout is a terminal (plain lines only otherwise, as Slurm logs
// want), and the records of --log-file and --plot. Other ranks get one
// that writes nothing.
type reporter struct {
	out     io.Writer
	tty     bool
	file    *runlog.Writer
	records []runlog.Record // kept for --plot
	keep    bool
	barLen  int // width of the bar on screen, 0 when none is shown
	lastBar time.Time
	err     error // first --log-file write error
}

// newReporter writes to out. progress auto shows a bar when out is a
// terminal and no launcher started us (launcher names the variable by
// which one announced the rank), since mpirun gives every rank a
// pseudo-terminal even when its own output goes to a file. plot, when
// set, is the PNG drawn from the records at the end: its directory must
// take a file now, not after hours of training.
func newReporter(out io.Writer, logFile string, resume bool, progress Progress, launcher string, plot string) (*reporter, error) {
	r := &reporter{out: out, keep: plot != ""}
	if plot != "" {
		if err := probeWritable(filepath.Dir(plot)); err != nil {
			return nil, fmt.Errorf("--plot %s: %v", plot, err)
		}
	}
	switch progress {
	case ProgressAlways:
		r.tty = true
	case ProgressAuto:
		if f, ok := out.(*os.File); ok && launcher == "" {
			if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
				r.tty = true
			}
		}
	}
	if logFile != "" {
		w, err := runlog.Create(logFile, resume)
		if err != nil {
			return nil, err
		}
		r.file = w
	}
	return r, nil
}

// quiet is the reporter of ranks other than 0.
func quiet() *reporter { return &reporter{out: io.Discard} }

// say prints one log line, above the progress bar.
func (r *reporter) say(format string, args ...any) {
	r.clearBar()
	fmt.Fprintf(r.out, format, args...)
}

// record appends to --log-file and keeps it for --plot.
func (r *reporter) record(rec runlog.Record) {
	if rec.Time.IsZero() {
		rec.Time = time.Now()
	}
	if r.keep {
		r.records = append(r.records, rec)
	}
	if err := r.file.Write(rec); err != nil && r.err == nil {
		r.err = fmt.Errorf("--log-file: %v", err)
	}
}

// progress redraws the bar (a terminal only, at most 10 times a second).
func (r *reporter) progress(step, total, epoch, epochs int, loss, sps float64, eta time.Duration) {
	if !r.tty || time.Since(r.lastBar) < 100*time.Millisecond {
		return
	}
	r.lastBar = time.Now()
	line := progressLine(step, total, epoch, epochs, loss, sps, eta)
	fmt.Fprintf(r.out, "\r%s", line)
	if n := r.barLen - len(line); n > 0 {
		fmt.Fprint(r.out, strings.Repeat(" ", n))
	}
	r.barLen = len(line)
}

// progressLine is the bar's text: [=====>    ] 45% step 210/468 ...
func progressLine(step, total, epoch, epochs int, loss, sps float64, eta time.Duration) string {
	const width = 30
	frac := 0.0
	if total > 0 {
		frac = min(float64(step)/float64(total), 1)
	}
	fill := int(frac * width)
	bar := strings.Repeat("=", fill)
	if fill < width {
		bar += ">" + strings.Repeat(" ", width-fill-1)
	}
	return fmt.Sprintf("[%s] %3.0f%% epoch %d/%d step %d/%d loss %.4f %.0f samples/s ETA %s",
		bar, 100*frac, epoch, epochs, step, total, loss, sps, eta.Round(time.Second))
}

func (r *reporter) clearBar() {
	if r.barLen > 0 {
		fmt.Fprintf(r.out, "\r%s\r", strings.Repeat(" ", r.barLen))
		r.barLen = 0
	}
}

func (r *reporter) close() error {
	r.clearBar()
	if err := r.file.Close(); err != nil && r.err == nil {
		r.err = err
	}
	return r.err
}
