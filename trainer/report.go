package trainer

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"train/runlog"
)

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

// newReporter writes to out. progress is "always", "never" or "auto": a
// bar when out is a terminal and no launcher started us, since mpirun
// gives every rank a pseudo-terminal even when its own output goes to a
// file.
func newReporter(out io.Writer, logFile string, resume bool, progress string, keepRecords bool) (*reporter, error) {
	r := &reporter{out: out, keep: keepRecords}
	switch progress {
	case "always":
		r.tty = true
	case "auto":
		if f, ok := out.(*os.File); ok && launcher() == "" {
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

// launcher names the environment variable by which mpirun, a PMIx
// launcher or srun announced this process, "" if none did.
func launcher() string {
	for _, v := range []string{"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"} {
		if os.Getenv(v) != "" {
			return v
		}
	}
	return ""
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
