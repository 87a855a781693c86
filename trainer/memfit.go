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

// modelMemory is what a rank's part of the model keeps: n parameters,
// state float32s of optimizer state per parameter, and ZeRO's stage over
// replicas ranks.
type modelMemory struct {
	n                     int64
	state, zero, replicas int
}

// need is the least memory it takes (bytes), and what that counts. Values,
// gradients and optimizer state are float32s; ZeRO stage 1 shards the
// state over the replicas, 2 the gradients too, 3 the values too. Under
// stages 2 and 3 each buffer is still mapped whole (only the rank's shard
// is kept in memory), so one buffer must be mappable, except where the
// kernel maps anything (overcommit 1).
func (mm modelMemory) need(overcommit int) (uint64, string) {
	p, g, o := 4*uint64(mm.n), 4*uint64(mm.n), 4*uint64(mm.n)*uint64(mm.state)
	r := uint64(max(mm.replicas, 1))
	what := "their float32 values, gradients and optimizer state"
	if mm.zero >= 1 {
		o /= r
		what += fmt.Sprintf(" (--zero %d shards over %d replicas)", mm.zero, r)
	}
	if mm.zero >= 2 {
		g /= r
	}
	if mm.zero >= 3 {
		p /= r
	}
	need := p + g + o
	if mm.zero >= 2 && overcommit != 1 && 4*uint64(mm.n) > need {
		need, what = 4*uint64(mm.n), "their float32 buffer, mapped whole under --zero 2 and 3"
	}
	return need, what
}

// fitsMemory refuses, before they are allocated, a model part whose
// buffers this machine cannot hold. Without it the rank ended in Go's
// fatal "out of memory" and its stack (a buffer larger than the kernel
// will map: RAM and swap under Linux's default heuristic, CommitLimit
// under strict overcommit) or in the OOM killer's SIGKILL, neither a
// line naming the option. The check is a necessary condition, never a
// promise: activations, data and the program come on top.
func fitsMemory(mm modelMemory, model string, m memInfo) error {
	limit := m.ram + m.swap
	if m.overcommit == 2 && m.commitLimit > 0 {
		limit = min(limit, m.commitLimit)
	}
	need, what := mm.need(m.overcommit)
	if need <= limit {
		return nil
	}
	return fmt.Errorf("--model %s: %d parameters on this rank, and %s take %.1f GiB, more than this machine's %.1f GiB of memory and swap: choose a smaller model, or cut it across ranks (--pipeline, --tensor-parallel, --zero)",
		model, mm.n, what, gib(need), gib(limit))
}

func gib(b uint64) float64 { return float64(b) / (1 << 30) }
