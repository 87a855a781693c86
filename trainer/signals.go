package trainer

import (
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

// stopSignals turns SIGTERM, SIGINT and SIGUSR1 into a request to stop at
// the next step boundary (checkStop agrees on it across ranks).
//
// Workload managers often deliver one request twice: Slurm signals every
// job step, so a rank gets SIGTERM from slurmd and again from srun
// forwarding its own copy. Repeats within dupWindow of the first signal are
// therefore ignored; a later one has the signal's usual effect (a user who
// presses Ctrl-C twice still gets out).
type stopSignals struct {
	ch   chan os.Signal
	got  atomic.Int64 // the first signal's number, 0 while none came
	done chan struct{}
}

const dupWindow = 2 * time.Second

func watchSignals() *stopSignals {
	s := &stopSignals{ch: make(chan os.Signal, 4), done: make(chan struct{})}
	signal.Notify(s.ch, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1)
	go func() {
		var first time.Time
		for {
			select {
			case <-s.done:
				return
			case sig := <-s.ch:
				n := int64(sig.(syscall.Signal))
				if first.IsZero() {
					first = time.Now()
					s.got.Store(n)
					continue
				}
				if time.Since(first) > dupWindow {
					signal.Reset(sig)
					syscall.Kill(os.Getpid(), sig.(syscall.Signal))
				}
			}
		}
	}()
	return s
}

// received is the first signal's number, 0 if none came.
func (s *stopSignals) received() int64 { return s.got.Load() }

// stop restores the signals' usual effect.
func (s *stopSignals) stop() {
	signal.Stop(s.ch)
	close(s.done)
}
