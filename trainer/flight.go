package trainer

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"train/flightrec"
	"train/mpi"
	"train/ps"
)

// The flight recorder's dumps (package flight records; this file decides
// when every rank writes its file). A dump is asked for
//   - by the watchdog, when it first sees a stall;
//   - by SIGUSR2 to any rank or to mpirun (which forwards it to every
//     rank); training goes on;
//   - by a rank that fails alone, before the job is aborted;
//   - by an agreed stop (a NaN): every rank dumps its own.
//
// A rank that dumps on its own account asks every other rank to dump too,
// with a small message on a communicator of its own (a Dup of the world,
// made before any split, so parameter servers hear it); a goroutine on
// every rank polls for those every pollEvery. That goroutine, not the
// training goroutine, writes the dump, so a rank whose training is stuck
// still writes its file.

// Reasons for a dump, as sent to the other ranks.
var dumpReasons = []string{"", "stall", "SIGUSR2", "abort", "nan", "error"}

const (
	flightTag = 0xf11
	pollEvery = 100 * time.Millisecond
	// dumpQuiet is how long after a dump for one reason a rank ignores
	// more requests for it: a SIGUSR2 that mpirun forwarded to every rank
	// makes every rank ask every other.
	dumpQuiet = 2 * time.Second
	// abortGrace is how long a failing rank waits, after asking the others
	// to dump, before the job is aborted.
	abortGrace = 600 * time.Millisecond
)

// flightBox is this rank's recorder and its dumps.
type flightBox struct {
	rec        *flightrec.Recorder
	dir        string
	rank, size int
	w          *mpi.World // dump requests; nil with one rank
	errw       io.Writer

	mu   sync.Mutex
	last map[string]time.Time // when each reason last dumped

	sig        chan os.Signal
	stop, done chan struct{}
}

// phaseNames names the progress ops (watchdog.go) for the recorder.
func phaseNames() []string {
	names := append([]string{}, opNames...)
	for _, w := range pipeWaits {
		names = append(names, "the pipeline's "+w)
	}
	return names
}

// phaseOf is progress op's index in phaseNames.
func phaseOf(op int32) int64 {
	if op < opPipe {
		return int64(op)
	}
	return int64(len(opNames)) + int64((op-opPipe)>>28)
}

// startFlight makes the recorder (nil with --flight-events 0), records
// w's calls as "world", and starts the dump goroutine. A --flight-dir
// given is made now on every rank (each writes its own dump there): a
// dump that cannot be written is lost when it is wanted, in a hang. The
// default is not: ./flight would litter every run's directory, and the
// checkpoint directory's is checked with it.
func startFlight(w *mpi.World, o *ObserveOptions, ckptDir string, errw io.Writer) (*flightBox, error) {
	rec := flightrec.New(o.FlightEvents, phaseNames())
	if rec == nil {
		return nil, nil
	}
	if o.FlightDir != "" {
		if err := checkWritable(o.FlightDir); err != nil {
			return nil, fmt.Errorf("--flight-dir %s: %v: name a directory every rank can write (dumps land there on a stall, SIGUSR2, an abort or a NaN stop)", o.FlightDir, err)
		}
	}
	dir := o.FlightDir
	if dir == "" {
		dir = "flight"
		if ckptDir != "" {
			dir = filepath.Join(ckptDir, "flight")
		}
	}
	f := &flightBox{rec: rec, dir: dir, rank: w.Rank(), size: w.Size(), errw: errw, last: map[string]time.Time{},
		sig: make(chan os.Signal, 4), stop: make(chan struct{}), done: make(chan struct{})}
	if w.Size() > 1 {
		d, err := w.Dup()
		if err != nil {
			return nil, err
		}
		f.w = d
	}
	w.Record(rec, "world")
	rec.NameTags(tagName)
	signal.Notify(f.sig, syscall.SIGUSR2)
	go f.loop()
	return f, nil
}

func (f *flightBox) loop() {
	runtime.LockOSThread()
	defer close(f.done)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-f.sig:
			f.dumpAll("SIGUSR2")
		case <-tick.C:
			if f.w == nil {
				continue
			}
			for {
				src, ok, err := f.w.Probe(flightTag)
				if err != nil || !ok {
					break
				}
				var m [1]int64
				if f.w.RecvInt64(m[:], src, flightTag) != nil {
					break
				}
				if m[0] > 0 && int(m[0]) < len(dumpReasons) {
					f.dump(dumpReasons[m[0]])
				}
			}
		}
	}
}

// dump writes this rank's file, unless it did for the same reason within
// dumpQuiet, and says where.
func (f *flightBox) dump(reason string) (string, bool) {
	if f == nil {
		return "", false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if time.Since(f.last[reason]) < dumpQuiet {
		return "", false
	}
	f.last[reason] = time.Now()
	path, err := flightrec.Write(f.dir, f.rec.Snapshot(f.rank, f.size, reason))
	if err != nil {
		fmt.Fprintf(f.errw, "train: rank %d: flight recorder: %v\n", f.rank, err)
		return "", false
	}
	return path, true
}

// dumpAll dumps this rank's file and asks every other rank for theirs.
func (f *flightBox) dumpAll(reason string) {
	if _, ok := f.dump(reason); !ok || f.w == nil {
		return
	}
	code := int64(0)
	for i, r := range dumpReasons {
		if r == reason {
			code = int64(i)
		}
	}
	for r := range f.size {
		if r != f.rank {
			f.w.SendInt64([]int64{code}, r, flightTag)
		}
	}
}

// failed dumps for a run that ended in err: an error only this rank knows
// of (the job is about to be aborted) asks every rank to dump and gives
// them abortGrace to do it; an agreed one (every rank stops) dumps this
// rank's own.
func (f *flightBox) failed(err error, own bool) {
	if f == nil || err == nil {
		return
	}
	if own {
		f.dumpAll("abort")
		if f.w != nil { // other ranks to wait for
			time.Sleep(abortGrace)
		}
		return
	}
	reason := "error"
	if isNotFinite(err) {
		reason = "nan"
	}
	f.dump(reason)
}

// where says where the dumps are, for messages.
func (f *flightBox) where() string {
	if f == nil {
		return ""
	}
	return fmt.Sprintf("; flight recorder dumps in %s (train doctor %s)", f.dir, f.dir)
}

// record makes the recorder record w's calls under name.
func (f *flightBox) record(w *mpi.World, name string) {
	if f != nil {
		w.Record(f.rec, name)
	}
}

func (f *flightBox) close() {
	if f == nil {
		return
	}
	signal.Stop(f.sig)
	close(f.stop)
	<-f.done
	if f.w != nil {
		f.w.Free()
	}
}

// tagName says what a message with tag on comm carries, for the dumps.
func tagName(comm string, tag int) string {
	if strings.HasPrefix(comm, "pipe@") {
		switch {
		case tag == tagEval:
			return "evaluation activations"
		case tag == tagEval+1:
			return "the tied embedding's gradient"
		case tag >= tagGrad && tag < tagState:
			return fmt.Sprintf("micro-batch %d's gradient", tag-tagGrad)
		case tag >= tagAct && tag < tagGrad:
			return fmt.Sprintf("micro-batch %d's activations", tag-tagAct)
		}
		return ""
	}
	switch tag {
	case ps.TagHeader:
		return "a parameter-server request's header"
	case ps.TagGrad:
		return "gradients for a parameter server"
	case ps.TagData:
		return "parameters from a parameter server"
	}
	return ""
}
