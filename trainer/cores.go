package trainer

import (
	"os"
	"runtime"
	"strconv"
	"strings"
)

// coresPerRank is the BLAS thread count when --threads does not say.
// When the launcher bound this rank to fewer CPUs than the machine has
// (mpirun's default --bind-to core for np <= 2), it is those CPUs; when it
// did not, the machine's CPUs shared among the ranks of this node, so
// ranks never oversubscribe the cores between them.
func coresPerRank(localSize int) int {
	avail := runtime.NumCPU() // the affinity mask, read at start-up
	total := onlineCPUs()
	if total == 0 || avail < total {
		return max(avail, 1)
	}
	return max(1, total/max(localSize, 1))
}

// onlineCPUs counts /sys/devices/system/cpu/online ("0-3,6"); 0 if it
// cannot be read.
func onlineCPUs() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return 0
	}
	n := 0
	for _, part := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, found := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		z := a
		var err2 error
		if found {
			z, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || z < a {
			return 0
		}
		n += z - a + 1
	}
	return n
}
