package trainer

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// coresPerRank is the BLAS thread count when --threads does not say, from
// this process's CPU affinity and the machine's online CPUs.
func coresPerRank(localSize int) int {
	b, _ := os.ReadFile("/sys/devices/system/cpu/online")
	return perRank(runtime.NumCPU(), parseCPUList(string(b)), localSize)
}

// perRank is the rule: when the launcher bound this rank to fewer CPUs
// than the machine has online (mpirun's default --bind-to core for
// np <= 2), the CPUs it may use (avail); when it did not, the online CPUs
// shared among the node's localSize ranks, so ranks never oversubscribe
// the cores between them. online 0 (unknown) counts as unbound to avail.
// mpi.oversubscribedOf reads "bound" the same way for the shared-memory
// barriers.
func perRank(avail, online, localSize int) int {
	if online == 0 || avail < online {
		return max(avail, 1)
	}
	return max(1, online/max(localSize, 1))
}

// parseCPUList counts the CPUs of a kernel CPU list ("0-3,6"); 0 if it
// cannot be read.
func parseCPUList(s string) int {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0
	}
	n := 0
	for _, part := range strings.Split(s, ",") {
		lo, hi, found := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		z := a
		var err2 error
		if found {
			z, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || z < a || a < 0 {
			return 0
		}
		n += z - a + 1
	}
	return n
}

// oversubscribed is the startup line's warning when a rank runs more
// threads than the CPUs it may use (avail, coresPerRank's count): threads
// beyond the cores take turns on them and every pass waits for the last
// one descheduled. ResNet-20 (`train bench step --model resnet --depth 20
// --bn local`) at 16 threads on 2 CPUs: 246 ms a step while the waiting
// threads spun, 71 since they yield (model.SetCPUs), against 45 to 50 at
// 2 threads. Allowed (a test may want more threads than cores), but said.
func oversubscribed(threads, avail int) string {
	if threads <= avail {
		return ""
	}
	return fmt.Sprintf("; --threads %d is more than the %d CPU(s) this rank may use: its threads will take turns on the cores and run slower (--threads 0 takes the cores available)", threads, avail)
}
