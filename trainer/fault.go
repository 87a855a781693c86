package trainer

import (
	"fmt"
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
const FaultEnv = "TRAIN_FAULT"

type fault struct {
	rank, step int
	kind       string
}

func parseFault(s string) (*fault, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ":")
	bad := fmt.Errorf("%s=%q: want RANK:STEP:KIND, KIND one of error, panic, kill, hang", FaultEnv, s)
	if len(parts) != 3 {
		return nil, bad
	}
	rank, err1 := strconv.Atoi(parts[0])
	step, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil || rank < 0 || step < 0 {
		return nil, bad
	}
	switch parts[2] {
	case "error", "panic", "kill", "hang":
	default:
		return nil, bad
	}
	return &fault{rank, step, parts[2]}, nil
}

// fire injects the fault if it is this rank's and step's.
func (f *fault) fire(rank, step int) error {
	if f == nil || f.rank != rank || f.step != step {
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
