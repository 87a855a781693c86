package mpi

// The Go half of the thin cgo layer (shim.c holds the C half): the link
// flags, error codes turned into errors, and chunking of long buffers.

/*
#cgo pkg-config: ompi
#cgo CFLAGS: -O3
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"math"
	"unsafe"
)

// Datatype codes shared with the C side.
const (
	cF32  = C.TR_F32
	cF64  = C.TR_F64
	cByte = C.TR_BYTE
	cI64  = C.TR_I64
)

// maxCount is the largest element count one MPI call takes (its count is a
// C int); longer buffers go in chunks.
const maxCount = math.MaxInt32

// errorf turns an MPI return code into an error naming the operation and
// the rank, with MPI's own message; nil for MPI_SUCCESS.
func errorf(rc C.int, rank int, op string) error {
	if rc == C.MPI_SUCCESS {
		return nil
	}
	var buf [C.MPI_MAX_ERROR_STRING]C.char
	var n C.int
	C.tr_error_string(rc, &buf[0], &n)
	msg := C.GoStringN(&buf[0], n)
	if msg == "" {
		msg = fmt.Sprintf("MPI error code %d", int(rc))
	}
	return fmt.Errorf("rank %d: %s: %s", rank, op, msg)
}

// chunks calls f on successive pieces of n elements of size elem bytes at
// p, each at most maxCount long, stopping at the first error. Empty buffers
// make no call at all.
func chunks(p unsafe.Pointer, n, elem int, f func(p unsafe.Pointer, count int) C.int) C.int {
	for off := 0; off < n; off += maxCount {
		count := min(n-off, maxCount)
		if rc := f(unsafe.Add(p, off*elem), count); rc != C.MPI_SUCCESS {
			return rc
		}
	}
	return C.MPI_SUCCESS
}
