package bench

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"train/model"
)

// PeakRSS is this process's peak resident memory in bytes (VmHWM), 0 if
// /proc does not say.
func PeakRSS() int64 { return status("VmHWM:") }

// SharedRSS is the shared memory (RssShmem) now resident in this process:
// pages of the segment the host's ranks reduce through (mpi.Shm), which
// RSS counts in every rank that touched them, although each exists once.
func SharedRSS() int64 { return status("RssShmem:") }

// status reads one kB field of /proc/self/status, in bytes; 0 if absent.
func status(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// MemcpyGBs measures single-thread copy bandwidth (bytes copied per
// second, in GB/s) with Go's copy between two buffers of size bytes, best
// of a few rounds. It borrows the benchmark's own buffer when that holds
// both halves, so the measurement adds nothing to peak memory.
func MemcpyGBs(scratch []float32, size int) float64 {
	var src, dst []byte
	if 4*len(scratch) >= 2*size {
		b := unsafe.Slice((*byte)(unsafe.Pointer(&scratch[0])), 4*len(scratch))
		src, dst = b[:size], b[size:2*size]
	} else {
		src, dst = make([]byte, size), make([]byte, size)
	}
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src) // fault the pages in
	best := 0.0
	for range 5 {
		t := time.Now()
		copy(dst, src)
		if gbs := float64(size) / time.Since(t).Seconds() / 1e9; gbs > best {
			best = gbs
		}
	}
	return best
}

// SgemmGFLOPs measures SGEMM as the model runs it (model.Sgemm:
// OpenBLAS's, cut across the rank's threads) on n x n x n matrices, in
// GFLOP/s: the yardstick a model's achieved FLOP rate is compared with.
// It is the best of the products made over sgemmSpan (3 at least). Best of
// three alone, on the 2-vCPU VM, gave one thread's rate in about one
// launch of ten at 2 threads: for the first 30 to 60 ms of a process the
// pool's second thread often did not get its core (each product's rate,
// printed: 187 219 218 214 216 219, then 400 to 419), and a bench's
// model FLOP/s then read 1.55 of SGEMM's.
func SgemmGFLOPs(n int) float64 {
	a := make([]float32, n*n)
	b := make([]float32, n*n)
	c := make([]float32, n*n)
	for i := range a {
		a[i], b[i] = 1e-3, 2e-3
	}
	best := 0.0
	start := time.Now()
	for i := 0; i < 3 || time.Since(start) < sgemmSpan; i++ {
		t := time.Now()
		model.Sgemm(false, false, n, n, n, 1, a, n, b, n, 0, c, n)
		if g := 2 * float64(n) * float64(n) * float64(n) / time.Since(t).Seconds() / 1e9; g > best {
			best = g
		}
	}
	return best
}

// sgemmSpan is how long SgemmGFLOPs keeps making products: several times
// the start-up stretch in which a thread may lack its core.
const sgemmSpan = 300 * time.Millisecond
