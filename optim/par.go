package optim

/*
#include "adam.h"
*/
import "C"

import (
	"sync/atomic"
	"unsafe"
)

// The updates are element-wise and memory-bound: AdamW's on 30M
// parameters is a few percent of a GPT step on one thread, and it would
// stay serial while the model's passes use every thread (--threads).
// Step makes one call into update.c, which runs the whole parameter
// vector, across the runs with and without weight decay, as one pass of
// the model's thread pool (UsePool: model.PoolRanges), cut into equal
// parts of at least 16K values, one a thread; the result does not depend
// on the thread count, each value's update being its own.
//
// The cut used to be per run, and the GPT's runs are a tensor each, most
// small: its update at 2 threads took 0.75 to 0.8 of one thread's time
// where one run of the same size took 0.5 (BenchmarkAdamWGPT). And it
// used to run on goroutines of its own, a second set of threads beside
// the pool's, which left ResNet-20's SGD (272,186 values) on the caller:
// cut across goroutines, it would have run while the pool's threads
// still spun after the backward's last pass. As a pass of the pool it
// takes those threads.

// pool is model.PoolRanges (nil: the caller alone).
var pool atomic.Pointer[byte]

// UsePool runs the updates as passes of the thread pool p, a C function
// float (*)(size_t n, size_t grain, float (*)(void *, size_t, size_t),
// void *) such as model.PoolRanges (nil: on the caller alone).
func UsePool(p unsafe.Pointer) { pool.Store((*byte)(p)) }

func poolFn() unsafe.Pointer { return unsafe.Pointer(pool.Load()) }

// cRuns is segs as adam.h's runs, nil for nil (one run, decaying).
func cRuns(segs []segment) []C.struct_k_seg {
	if segs == nil {
		return nil
	}
	cs := make([]C.struct_k_seg, len(segs))
	for i, s := range segs {
		cs[i].end = C.size_t(s.End)
		if s.Decay {
			cs[i].decay = 1
		}
	}
	return cs
}

// runsArg is cs for a C call: its first element and length.
func runsArg(cs []C.struct_k_seg) (*C.struct_k_seg, C.size_t) {
	if len(cs) == 0 {
		return nil, 0
	}
	return &cs[0], C.size_t(len(cs))
}
