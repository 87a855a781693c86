package model

import (
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkPass is the cost of a pass of the pool itself, at 1 to 16
// threads: passes of one or four units a thread whose units do nothing
// (spinPass at 0 us: a clock read each), so ns/op is the hand-off to the
// workers, their taking of chunks and the caller's wait for the last.
// ResNet-20 makes about 265 passes a step; on the 16-core machine
// (2026-11-30) its smallest ones took 9 to 11 us a pass at 16 threads
// (t_add_weights, t_direct_weights) for microseconds of work, so at a
// 12 ms step the passes' own cost may be a tenth of it.
//
//	go test ./model -run '^$' -bench BenchmarkPass -benchtime 20000x
//
// Above the CPUs' count the workers yield instead of spinning (par.c's
// oversub), so those rows time the scheduler, not the pool.
//
// Each row's take-unread twin, run right after it, is the pool as it was
// before the threads read another's share before taking from it (par.c's
// take): T*(T-1) locked writes at each pass's end, to measure at 16
// threads (at 2 on the Zen 4 VM the two were within the runs' noise,
// 0.45 to 0.8 us a pass).
//
// The pass's description, gen, the workers' end count and the sleepers'
// count had shared one cache line (now par.c's cur, finished, ends and
// gen_sleepers, each on its own): at 2
// threads on the Zen 5 VM T=2/units=2 took 1.9 to 3.5 us a pass with them
// together, 1.0 to 2.1 apart (6 rounds each, the two builds alternated);
// each worker's own finished flag in place of that count then measured
// 1,464 against 1,418 ns (medians of 16 rounds, 7 faster): neutral at 2
// threads, where one worker wrote the count; at 16, 15 did, one after
// another. scripts/bench/many-cores.sh's pool part runs the build before
// both (its POOL_BASE) beside this one for 16 threads.
func BenchmarkPass(b *testing.B) {
	for _, T := range []int{1, 2, 4, 8, 16} {
		for _, per := range []int{1, 4} {
			for _, read := range []bool{true, false} {
				name := fmt.Sprintf("T=%d/units=%d", T, per*T)
				if !read {
					name += "/take-unread"
				}
				b.Run(name, func(b *testing.B) {
					// SetThreads sizes GOMAXPROCS with the pool (sched.go);
					// the testing package wants it back as it was.
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
					defer SetThreads(1)
					defer stealRead(true)
					stealRead(read)
					if got := SetThreads(T); got != T {
						b.Fatalf("SetThreads(%d) gave %d", T, got)
					}
					spinPass(per*T, 0) // the workers started and spinning
					b.ResetTimer()
					for range b.N {
						spinPass(per*T, 0)
					}
				})
			}
		}
	}
}
