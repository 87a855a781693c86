package trainer

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// FaultEnv names the environment variable that injects a fault, for tests
// of failure handling: "RANK:STEP:KIND" makes rank RANK fail when it
// reaches step STEP (0-based, before computing it). KIND is
//
//	error  return an error (the ordinary failure path: message, abort)
//	panic  panic (main's recovery path)
//	kill   SIGKILL itself (a crash: no message, no cleanup)
//	hang   sleep forever (a stalled rank)
//	nan    make this rank's gradients NaN (a diverging run)
//	slow   sleep slowDelay at the start of this and every later step (an
//	       uneven worker, for the asynchronous strategies); "slow:DURATION"
//	       (RANK:STEP:slow:2s) sleeps that long instead
//	kill-in-checkpoint  (rank 0) SIGKILL itself half way through writing a checkpoint
//	skip   leave out the step's first gradient allreduce (a rank that
//	       skips a collective; the strategy allreduce)
//	size   reduce only half of the step's first gradient bucket (a rank
//	       that calls a collective with another size)
//	empty  reduce none of it (a rank that calls a collective with an
//	       empty buffer where the others pass theirs)
const FaultEnv = "TRAIN_FAULT"

// slowDelay is the slow fault's pause per step: many MLP steps' worth.
const slowDelay = 50 * time.Millisecond

type fault struct {
	rank, step int
	kind       string
	delay      time.Duration // slow's
}

func parseFault(s string) (*fault, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ":")
	bad := fmt.Errorf("%s=%q: want RANK:STEP:KIND, KIND one of error, panic, kill, hang, nan, slow, slow:DURATION, kill-in-checkpoint, skip, size, empty", FaultEnv, s)
	delay := slowDelay
	if len(parts) == 4 && parts[2] == "slow" {
		d, err := time.ParseDuration(parts[3])
		if err != nil || d <= 0 {
			return nil, bad
		}
		delay, parts = d, parts[:3]
	}
	if len(parts) != 3 {
		return nil, bad
	}
	rank, err1 := strconv.Atoi(parts[0])
	step, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil || rank < 0 || step < 0 {
		return nil, bad
	}
	switch parts[2] {
	case "error", "panic", "kill", "hang", "nan", "slow", "kill-in-checkpoint", "skip", "size", "empty":
	default:
		return nil, bad
	}
	return &fault{rank, step, parts[2], delay}, nil
}

// tamper is the skip, size and empty faults' change to the first gradient bucket
// rank reduces at the fault's step (step reads the step under way); nil
// for the other kinds.
func (f *fault) tamper(rank int, step func() int) func(b bucket) (bucket, bool) {
	if f == nil || f.rank != rank || (f.kind != "skip" && f.kind != "size" && f.kind != "empty") {
		return nil
	}
	fired := false
	return func(b bucket) (bucket, bool) {
		if fired || step() != f.step {
			return b, true
		}
		fired = true
		if f.kind == "skip" {
			return b, false
		}
		if f.kind == "empty" {
			return bucket{b.lo, b.lo}, true
		}
		return bucket{b.lo, b.lo + (b.hi-b.lo)/2}, true
	}
}

// is reports whether the fault of kind is this rank's and step's.
func (f *fault) is(kind string, rank, step int) bool {
	return f != nil && f.kind == kind && f.rank == rank && f.step == step
}

// fire injects the fault, at the start of a step, if it is this rank's
// and step's (the nan and checkpoint kinds act elsewhere; slow acts on
// every step from its own).
func (f *fault) fire(rank, step int) error {
	if f != nil && f.kind == "slow" && f.rank == rank && step >= f.step {
		time.Sleep(f.delay)
		return nil
	}
	if f == nil || f.rank != rank || f.step != step || f.kind != "error" && f.kind != "panic" && f.kind != "kill" && f.kind != "hang" {
		return nil
	}
	switch f.kind {
	case "panic":
		panic(fmt.Sprintf("injected panic at step %d", step))
	case "kill":
		syscall.Kill(syscall.Getpid(), syscall.SIGKILL)
	case "hang":
		for {
			time.Sleep(time.Hour)
		}
	}
	return fmt.Errorf("injected fault at step %d (%s)", step, FaultEnv)
}

// killHalfWay is the checkpoint writer of the kill-in-checkpoint fault:
// it passes the first 64 KiB on, then SIGKILLs the process, leaving a torn
// temporary file as a crash would.
func killHalfWay(w io.Writer) io.Writer { return &killer{w: w, left: 64 << 10} }

type killer struct {
	w    io.Writer
	left int
}

func (k *killer) Write(p []byte) (int, error) {
	if len(p) >= k.left {
		k.w.Write(p[:k.left])
		if f, ok := k.w.(*os.File); ok {
			f.Sync()
		}
		syscall.Kill(syscall.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
	k.left -= len(p)
	return k.w.Write(p)
}
