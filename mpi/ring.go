package mpi

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"time"
	"unsafe"

	"train/flightrec"
)

// Ring tuning: the knobs of RingAllreduceFloat32, in one place.
//
// A reduce-scatter step receives its chunk in segments of RingSegment
// floats into RingSlots scratch slots and adds each into the buffer as it
// lands, while later segments are still being copied. Slots x segment (1
// MiB by default) is all the extra memory the ring uses, and fits in L2, so
// the add reads the scratch from cache.
var (
	RingSegment = 64 << 10 // floats (256 KiB)
	RingSlots   = 4
)

// RingAllreduceFloat32 sums (or averages, op Mean) buf across all ranks in
// place, with the bandwidth-optimal ring of Patarasuk and Yuan (2009), as
// Baidu and Horovod use it: the buffer is cut into Size chunks; in N-1
// reduce-scatter steps each rank sends one chunk to its right neighbour and
// adds the chunk arriving from its left one, after which rank r holds the
// complete sum of chunk r+1; in N-1 all-gather steps the complete chunks
// travel once around the ring. Each rank sends and receives 2(N-1)/N of
// the buffer, whatever N. For Mean each rank scales only the chunk it
// completed, before the all-gather.
//
// Every rank ends with bit-identical values (each chunk is summed once, by
// its owner, and copied). Any length works, shorter than Size and zero
// included; chunks differ in length by at most one element. op must be Sum
// or Mean.
//
// Every rank must pass a slice of the same length. Where they differ, the
// ranks on either side of the difference return an error at the first
// message that shows it (tr_ring_step), and the others may wait: the
// caller ends the job, which may leave unmatched sends on the ring's
// communicator.
func (w *World) RingAllreduceFloat32(buf []float32, op Op) error {
	return w.ringAllreduce(buf, op, None)
}

// Compression is the ring's wire format for gradients (--compress).
type Compression int

const (
	None Compression = iota // float32
	FP16                    // IEEE half: 10-bit mantissa, overflows past 65504
	BF16                    // bfloat16: float32's range, 7-bit mantissa
)

func (c Compression) String() string {
	switch c {
	case FP16:
		return "fp16"
	case BF16:
		return "bf16"
	}
	return "none"
}

// ParseCompression reads --compress's value.
func ParseCompression(s string) (Compression, error) {
	switch s {
	case "", "none":
		return None, nil
	case "fp16":
		return FP16, nil
	case "bf16":
		return BF16, nil
	}
	return None, fmt.Errorf("--compress %q: choose none, fp16 or bf16", s)
}

// RingAllreduceCompressed is RingAllreduceFloat32 with chunks sent as
// 16-bit floats (Horovod's Compression.fp16): each arriving chunk is
// decoded and added in float32, and the owner of each reduced chunk rounds
// it to the wire format before the all-gather, so every rank still ends
// with the same bits. Half the bytes on the wire; the sum carries the
// format's rounding (2^-11 relative for fp16, 2^-8 for bf16) at each of the
// N-1 hops of the reduce-scatter and once more at the end.
func (w *World) RingAllreduceCompressed(buf []float32, op Op, c Compression) error {
	return w.ringAllreduce(buf, op, c)
}

func (w *World) ringAllreduce(buf []float32, op Op, comp Compression) error {
	if op != Sum && op != Mean {
		panic("mpi: ring allreduce supports Sum and Mean")
	}
	algo := "ring"
	if comp != None {
		algo = "ring " + comp.String()
	}
	id := w.fl.Begin("allreduce", algo, flightrec.All, 4*int64(len(buf)), "float32")
	err := w.ringAllreduceOf(buf, op, comp)
	w.fl.End(id, err)
	return err
}

func (w *World) ringAllreduceOf(buf []float32, op Op, comp Compression) error {
	n := w.size
	if n == 1 {
		return nil
	}
	// An empty slice goes round too (empty messages): where another rank's
	// is not empty, both fail at the step (tr_ring_step) instead of this
	// rank returning and leaving the others waiting.
	chunk := evenChunks(len(buf), n)
	if _, hi := chunk(0); hi > maxCount {
		return fmt.Errorf("rank %d: ring allreduce of %d floats: a chunk exceeds MPI's count limit %d", w.rank, len(buf), maxCount)
	}
	return w.ring2(buf, chunk, op, comp, true, true)
}

// RingReduceScatterFloat32 leaves in rank r's range owned(r) of buf the
// sum (or mean) of every rank's values there, with the bits that
// RingAllreduceFloat32 of the same buf leaves there (and so the shared
// memory allreduce, which sums in the ring's order); the rest of buf
// holds partial sums. The ranges must be disjoint and cover buf; any may
// be empty (ZeRO's shards of a bucket: most ranks own none of a small
// one).
//
// From 3 ranks on it runs the allreduce's first half over the
// allreduce's chunks, after which rank r holds chunk r+1 complete, and
// then moves the pieces of each complete chunk to the ranks that own
// them (one Exchange): each rank sends at most 1/N of buf more than the
// half alone. The ring cut by the owned ranges would start each
// element's sum at another rank than the allreduce does: last-bit
// differences that AdamW's m/sqrt(v) carried to 3.2e-5 of the MLP's
// weights after 50 steps at np=4 (TestZeroEquivalence, which now finds
// the same bits); and a range inside one rank's shard went round as a
// chain of N-1 whole-range hops. At 2 ranks it is that ring: a sum of
// two does not depend on its order.
func (w *World) RingReduceScatterFloat32(buf []float32, owned func(rank int) (lo, hi int), op Op) error {
	if op != Sum && op != Mean {
		panic("mpi: ring reduce-scatter supports Sum and Mean")
	}
	n, r := w.size, w.rank
	if n == 1 { // an empty buf goes round (ringAllreduceOf)
		return nil
	}
	id := w.fl.Begin("reduce_scatter", "ring", flightrec.All, 4*int64(len(buf)), "float32")
	if n == 2 {
		err := w.ring2(buf, w.ringChunks(owned), op, None, true, false)
		w.fl.End(id, err)
		return err
	}
	chunk := evenChunks(len(buf), n)
	err := w.ring2(buf, chunk, op, None, true, false)
	if err == nil {
		var send, recv []Msg
		mlo, mhi := owned(r)
		clo, chi := chunk((r + 1) % n)
		for k := range n {
			if k == r {
				continue
			}
			if lo, hi := owned(k); max(lo, clo) < min(hi, chi) {
				send = append(send, Msg{F32: buf[max(lo, clo):min(hi, chi)], Peer: k, Tag: tagPieces})
			}
			if lo, hi := chunk((k + 1) % n); max(lo, mlo) < min(hi, mhi) {
				recv = append(recv, Msg{F32: buf[max(lo, mlo):min(hi, mhi)], Peer: k, Tag: tagPieces})
			}
		}
		err = w.Exchange(send, recv)
	}
	w.fl.End(id, err)
	return err
}

// tagPieces tags RingReduceScatterFloat32's moves of complete pieces.
const tagPieces = 0x72

// evenChunks is the ring allreduce's cut of n values into size chunks
// that differ in length by at most one.
func evenChunks(n, size int) func(i int) (lo, hi int) {
	return func(i int) (lo, hi int) {
		q, rem := n/size, n%size
		lo = i*q + min(i, rem)
		hi = lo + q
		if i < rem {
			hi++
		}
		return lo, hi
	}
}

// RingAllgatherFloat32 is the ring's second half on its own: every rank
// sends its range owned(rank) of buf around the ring, and ends with every
// rank's range in place (ZeRO's parameters after each rank updated its
// shard). The ranges are as for RingReduceScatterFloat32.
func (w *World) RingAllgatherFloat32(buf []float32, owned func(rank int) (lo, hi int)) error {
	if w.size == 1 { // an empty buf goes round (ringAllreduceOf)
		return nil
	}
	id := w.fl.Begin("allgather", "ring", flightrec.All, 4*int64(len(buf)), "float32")
	err := w.ring2(buf, w.ringChunks(owned), Sum, None, false, true)
	w.fl.End(id, err)
	return err
}

// ringChunks maps the ring's chunks onto ranks' ranges: the reduce-scatter
// completes chunk r+1 on rank r, so chunk i is rank i-1's range.
func (w *World) ringChunks(owned func(rank int) (lo, hi int)) func(int) (int, int) {
	n := w.size
	return func(i int) (int, int) { return owned((i - 1 + n) % n) }
}

// ring2 runs the ring's reduce-scatter and all-gather halves (either or
// both) over buf cut by chunk: after the first, rank r holds chunk r+1
// complete (scaled for Mean, rounded for comp); the second sends the
// complete chunks once around.
func (w *World) ring2(buf []float32, chunk func(i int) (lo, hi int), op Op, comp Compression, scatter, gather bool) error {
	n, r := w.size, w.rank
	if need := RingSegment * RingSlots; len(w.scratch) != need {
		w.scratch = make([]float32, need)
	}
	kind := C.int(0) // float32 on the wire
	if comp == FP16 {
		kind = C.TR_F16
	} else if comp == BF16 {
		kind = C.TR_BF16
	}
	left, right := (r-1+n)%n, (r+1)%n
	step := func(send, recv int, reduce bool, what string) error {
		slo, shi := chunk(send)
		rlo, rhi := chunk(recv)
		if shi-slo > maxCount || rhi-rlo > maxCount {
			return fmt.Errorf("rank %d: %s of %d floats: a chunk exceeds MPI's count limit %d", r, what, len(buf), maxCount)
		}
		red := C.int(0)
		if reduce {
			red = 1
		}
		// A 16-bit value is 2 bytes on the wire, and the scratch's 4-byte
		// slots hold twice as many: RingSlots receive and RingSlots send
		// slots of RingSegment.
		bytes := int64(4)
		if comp != None {
			bytes = 2
		}
		traffic.sent.Add(bytes * int64(shi-slo))
		traffic.recv.Add(bytes * int64(rhi-rlo))
		var bad C.struct_tr_ring_bad
		rc := C.tr_ring_step(w.ring, C.int(left), C.int(right),
			(*C.float)(ptr(buf, slo, shi)), C.long(shi-slo),
			(*C.float)(ptr(buf, rlo, rhi)), C.long(rhi-rlo),
			unsafe.Pointer(&w.scratch[0]), C.long(RingSegment), C.int(RingSlots), red, kind, C.long(len(buf)), &bad)
		if rc == C.TR_RING_MISMATCH {
			return ringMismatch(left, what, len(buf), bad)
		}
		return errorf(rc, r, what)
	}
	if scatter {
		for s := 0; s < n-1; s++ {
			if err := step((r-s+n)%n, (r-s-1+2*n)%n, true, "ring reduce-scatter"); err != nil {
				return err
			}
		}
		if lo, hi := chunk((r + 1) % n); hi > lo {
			if op == Mean {
				C.tr_scale_f32((*C.float)(unsafe.Pointer(&buf[lo])), C.float(1/float32(n)), C.long(hi-lo))
			}
			if comp != None {
				C.tr_quantize16((*C.float)(unsafe.Pointer(&buf[lo])), C.long(hi-lo), kind)
			}
		}
	}
	if gather {
		for s := 0; s < n-1; s++ {
			if err := step((r+1-s+n)%n, (r-s+n)%n, false, "ring all-gather"); err != nil {
				return err
			}
		}
	}
	return nil
}

// ringMismatch is the error of a ring step whose message from rank left
// was not the one this rank's call expected: the ranks passed slices of
// different lengths.
func ringMismatch(left int, what string, length int, bad C.struct_tr_ring_bad) error {
	var got string
	switch {
	case bad.got < 0:
		got = fmt.Sprintf("holds more than the %d floats this rank expected", int64(bad.want))
	case bad.got != bad.want:
		got = fmt.Sprintf("holds %d floats where this rank expected %d", int64(bad.got), int64(bad.want))
	case bad.ends != bad.should_end && bad.should_end != 0:
		got = "is not the last of its part, where this rank's part ends"
	case bad.ends != bad.should_end:
		got = "is the last of its part, where this rank expected more"
	default:
		return fmt.Errorf("%s of %d floats: rank %d's message comes from a slice of another length: every rank must pass the same slice", what, length, left)
	}
	if bad.other_length != 0 {
		got += ", from a slice of another length"
	}
	return fmt.Errorf("%s of %d floats: rank %d's message %s: every rank must pass the same slice", what, length, left, got)
}

// ptr is &buf[lo] for a non-empty range, nil for an empty one (which may
// sit at the end of buf).
func ptr(buf []float32, lo, hi int) unsafe.Pointer {
	if hi == lo {
		return nil
	}
	return unsafe.Pointer(&buf[lo])
}

// AddFloat32 adds src into dst element by element with the ring's
// vectorised kernel (exported for its benchmark). It panics if the lengths
// differ.
func AddFloat32(dst, src []float32) {
	if len(dst) != len(src) {
		panic("mpi: AddFloat32 length mismatch")
	}
	if len(dst) > 0 {
		C.tr_add_f32((*C.float)(unsafe.Pointer(&dst[0])), (*C.float)(unsafe.Pointer(&src[0])), C.long(len(dst)))
	}
}

// ConvertGBs measures how fast one thread puts float32 data through the
// compressed ring's conversions, an encode to c's 16-bit format and a
// decode added back (what every byte the ring sends and receives costs on
// top of the wire), in GB/s of float32 data: the plan's --convert-gbs.
func ConvertGBs(c Compression, n int) float64 {
	kind := C.int(C.TR_F16)
	if c == BF16 {
		kind = C.TR_BF16
	}
	src := make([]float32, n)
	for i := range src {
		src[i] = float32(i%1000) * 1e-3
	}
	wire, dst := make([]uint16, n), make([]float32, n)
	sp, wp, dp := (*C.float)(unsafe.Pointer(&src[0])), (*C.ushort)(unsafe.Pointer(&wire[0])), (*C.float)(unsafe.Pointer(&dst[0]))
	reps := 0
	start := time.Now()
	for time.Since(start) < 200*time.Millisecond {
		C.tr_encode16(wp, sp, C.long(n), kind)
		C.tr_decode16(dp, wp, C.long(n), kind, 1)
		reps++
	}
	return float64(4*n*reps) / time.Since(start).Seconds() / 1e9
}
