package trainer

import (
	"fmt"
	"io"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"train/flightrec"
	"train/mpi"
)

// What a rank can be doing, for the stall report: computing, or waiting
// in one of the job's collectives for the other ranks.
const (
	opComputing int32 = iota
	opGradients
	opBatchNorm
	opLog
	opStopCheck
	opEvaluation
	opCheckpoint
	opReplicaCheck
	opBroadcast
	opAverage
)

// opPipe and above is a pipeline stage waiting on a neighbour
// (enterPipe): the kind of wait, the neighbour's stage and the
// micro-batch packed into the op.
const opPipe int32 = 1 << 10

var pipeWaits = []string{"recv F", "recv B", "send F", "send B"}
var pipeWaitNames = []string{"receiving micro-batch %d's activations from stage %d", "receiving micro-batch %d's gradient from stage %d",
	"sending micro-batch %d's activations to stage %d", "sending micro-batch %d's gradient to stage %d"}

// opName says what op is, for the stall report.
func opName(op int64) string {
	if op < int64(opPipe) {
		return opNames[op]
	}
	v := op - int64(opPipe)
	return fmt.Sprintf(pipeWaitNames[v>>28], v&0xffff, (v>>16)&0xfff)
}

// enterPipe records a pipeline wait: what (one of pipeWaits) for
// micro-batch i, from or to stage peer.
func (p *progress) enterPipe(what string, i, peer int) {
	for k, w := range pipeWaits {
		if w == what {
			p.enter(opPipe + int32(k)<<28 + int32(peer&0xfff)<<16 + int32(i&0xffff))
			return
		}
	}
	p.enter(opComputing)
}

var opNames = []string{"computing", "the gradient allreduce", "a BatchNorm reduction", "the log reduction",
	"the stop check", "the evaluation reduction", "a checkpoint", "the replica check", "the start broadcast",
	"the model average"}

// progress is where this rank is, written by the training goroutine and
// read by the watchdog: plain atomics, nothing the training path waits
// on.
type progress struct {
	step  atomic.Int64
	op    atomic.Int32
	since atomic.Int64 // unix nanoseconds of entering op

	rec *flightrec.Recorder // told the same; nil: none
}

func (p *progress) enter(op int32) {
	p.op.Store(op)
	p.since.Store(time.Now().UnixNano())
	p.rec.SetPhase(phaseOf(op))
}

func (p *progress) leave() { p.enter(opComputing) }
func (p *progress) at(step int) {
	p.step.Store(int64(step))
	p.rec.SetStep(int64(step))
}
func (p *progress) snapshot() [3]int64 {
	return [3]int64{p.step.Load(), int64(p.op.Load()), p.since.Load()}
}

// watchdogTag marks the watchdog's messages on its own communicator.
const watchdogTag = 0x57d

// watchdog runs beside training on every rank. Each second every rank
// sends rank 0 its progress (a tiny eager message on a World of its own,
// so it never waits and never mixes with the training collectives); rank
// 0 keeps the latest of each rank. When some rank has waited in a
// collective for longer than warn, rank 0 names the ranks that are not
// there (still computing, in another collective or step, or silent) and
// the step, every warn; past timeout it aborts the job with that message.
type watchdog struct {
	w             *mpi.World
	prog          *progress
	warn, timeout time.Duration
	errw          io.Writer
	fl            *flightBox // asked for dumps when a stall starts; nil: none
	stop, done    chan struct{}
}

// rankState is rank 0's record of one rank.
type rankState struct {
	step, op, since int64
	heard           time.Time
}

func startWatchdog(w *mpi.World, prog *progress, warn, timeout time.Duration, errw io.Writer, fl *flightBox) *watchdog {
	d := &watchdog{w: w, prog: prog, warn: warn, timeout: timeout, errw: errw, fl: fl,
		stop: make(chan struct{}), done: make(chan struct{})}
	go d.loop()
	return d
}

func (d *watchdog) loop() {
	runtime.LockOSThread()
	defer close(d.done)
	period := min(time.Second, d.warn/4)
	tick := time.NewTicker(period)
	defer tick.Stop()
	states := make([]rankState, d.w.Size())
	start := time.Now()
	for i := range states {
		states[i].heard = start
	}
	var lastWarn time.Time
	stalled := false // the flight recorder has dumped for the stall under way
	for {
		select {
		case <-d.stop:
			return
		case <-tick.C:
		}
		s := d.prog.snapshot()
		if d.w.Rank() != 0 {
			if d.w.SendInt64(s[:], 0, watchdogTag) != nil {
				return
			}
			continue
		}
		now := time.Now()
		states[0] = rankState{s[0], s[1], s[2], now}
		for {
			src, ok, err := d.w.Probe(watchdogTag)
			if err != nil {
				return
			}
			if !ok {
				break
			}
			var m [3]int64
			if d.w.RecvInt64(m[:], src, watchdogTag) != nil {
				return
			}
			states[src] = rankState{m[0], m[1], m[2], now}
		}
		msg, waited := assess(states, now, max(3*period, 3*time.Second))
		if waited < d.warn {
			stalled = false
			continue
		}
		if !stalled {
			// Every rank writes its recorder, the stalled ones included
			// (their dump goroutine is not the one that is stuck).
			d.fl.dumpAll("stall")
			stalled = true
		}
		if d.timeout > 0 && waited >= d.timeout {
			fmt.Fprintf(d.errw, "train: rank 0: %s%s: aborting (--stall-timeout %v)\n", msg, d.fl.where(), d.timeout)
			d.fl.dumpAll("abort")
			time.Sleep(abortGrace)
			d.w.Abort(3)
			return
		}
		if now.Sub(lastWarn) >= d.warn {
			fmt.Fprintf(d.errw, "train: rank 0: %s%s\n", msg, d.fl.where())
			lastWarn = now
		}
	}
}

// assess describes a stall: the longest any rank has waited in a
// collective, and which ranks are not with it. silent is how long
// without a message makes a rank count as silent (a frozen process).
func assess(states []rankState, now time.Time, silent time.Duration) (string, time.Duration) {
	// The longest waiter defines the collective and step the job is stuck in.
	longest := -1
	for r, s := range states {
		if s.op != int64(opComputing) && (longest < 0 || s.since < states[longest].since) {
			longest = r
		}
	}
	if longest < 0 {
		return "", 0
	}
	stuck := states[longest]
	waited := now.Sub(time.Unix(0, stuck.since))
	var waiting []int
	var missing []string
	for r, s := range states {
		switch {
		case now.Sub(s.heard) > silent:
			missing = append(missing, fmt.Sprintf("rank %d (silent for %.0f s; last at step %d, %s)", r, now.Sub(s.heard).Seconds(), s.step, opName(s.op)))
		case s.op == stuck.op && s.step == stuck.step:
			waiting = append(waiting, r)
		default:
			missing = append(missing, fmt.Sprintf("rank %d (at step %d, %s for %.0f s)", r, s.step, opName(s.op), now.Sub(time.Unix(0, s.since)).Seconds()))
		}
	}
	sort.Ints(waiting)
	what := fmt.Sprintf("stall at step %d: ranks %v have waited in %s for %.0f s", stuck.step, waiting, opName(stuck.op), waited.Seconds())
	if len(missing) == 0 {
		return what + "; every rank is in it (a slow collective, or a stuck network)", waited
	}
	return what + "; not arrived: " + strings.Join(missing, ", "), waited
}

// close stops the watchdog goroutine and frees its communicators.
func (d *watchdog) close() {
	if d == nil {
		return
	}
	close(d.stop)
	<-d.done
	d.w.Free()
}
