package trainer

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// memInfo is what the kernel lets a process map: RAM and swap (bytes),
// CommitLimit, and the overcommit mode (/proc/sys/vm/overcommit_memory:
// 0 heuristic, 1 always, 2 strict).
type memInfo struct {
	ram, swap, commitLimit uint64
	overcommit             int
}

// readMemInfo reads /proc; ok is false where it cannot (then nothing is
// checked).
func readMemInfo() (m memInfo, ok bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return m, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, _ := strings.Cut(sc.Text(), ":")
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			continue
		}
		switch name {
		case "MemTotal":
			m.ram = kb << 10
		case "SwapTotal":
			m.swap = kb << 10
		case "CommitLimit":
			m.commitLimit = kb << 10
		}
	}
	if b, err := os.ReadFile("/proc/sys/vm/overcommit_memory"); err == nil {
		m.overcommit, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	return m, m.ram > 0
}

// fitsMemory refuses, before they are allocated, the parameter and
// gradient buffers of n float32s each that this machine cannot hold.
// Without it the rank ends in Go's fatal "out of memory" and its stack
// (one buffer larger than the kernel will map: RAM and swap under Linux's
// default heuristic) or in the OOM killer's SIGKILL (both buffers touched
// beyond RAM and swap), neither a line naming the option. ZeRO stages 2
// and 3 keep only this rank's shard of the gradients (and, at 3, of the
// parameters) in memory, but each buffer is still mapped whole: for them
// only one buffer must be mappable, and nothing is checked where the
// kernel maps anything (overcommit 1). The check is a necessary
// condition, never a promise: activations and optimizer state come on
// top.
func fitsMemory(n int64, zero int, model string, m memInfo) error {
	limit := m.ram + m.swap
	if m.overcommit == 2 && m.commitLimit > 0 {
		limit = min(limit, m.commitLimit)
	}
	need, what := 8*uint64(n), "their float32 values and gradients"
	if zero >= 2 {
		if m.overcommit == 1 {
			return nil
		}
		need, what = 4*uint64(n), "their float32 buffer, mapped whole under --zero 2 and 3"
	}
	if need <= limit {
		return nil
	}
	return fmt.Errorf("--model %s: %d parameters on this rank, and %s take %.1f GiB, more than this machine's %.1f GiB of memory and swap: choose a smaller model, or cut it across ranks (--pipeline, --tensor-parallel)",
		model, n, what, gib(need), gib(limit))
}

func gib(b uint64) float64 { return float64(b) / (1 << 30) }
