// Package openblas loads OpenBLAS at run time: the model's C code calls
// its cblas_sgemm (CblasSgemm), and Load also installs it behind gonum's
// blas32 interface.
//
// The binary does not link OpenBLAS: it is dlopen'ed, so train starts on a
// machine without it (the GPU machine's image, a minimal container), where
// the model multiplies with plain C loops. Only Sgemm goes to OpenBLAS, the
// one routine the layers spend their time in; every other blas32 routine
// stays gonum's. Debian's libopenblas0 gives about 100 GFLOP/s per core on this
// project's Zen 4 machines against gonum's 11.
package openblas

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/cpu"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/gonum"
)

// Library is the shared object Load opens by default (Debian's
// libopenblas0 provides it through update-alternatives).
const Library = "libopenblas.so.0"

// Info describes the loaded library.
type Info struct {
	Core    string // the kernel set OpenBLAS chose for this CPU
	Config  string
	Threads int
	// Forced is OPENBLAS_CORETYPE as the library loaded, "" if unset.
	Forced string
	// Replaced is the kernel set OpenBLAS chose itself when Load found it
	// fallen back to Prescott's and loaded the library again with better
	// ones (Core), "" otherwise.
	Replaced string
}

// Prescott is the kernel set OpenBLAS falls back to for a CPU its table does
// not know. Debian 12's OpenBLAS 0.3.21 does so for every Intel family-6
// model it does not list, newer ones included (OpenBLAS 0.3.25 chooses by
// the CPU's features instead: OpenMathLib/OpenBLAS#4268): on the GPU
// machine's Emerald Rapids Xeon (model 207) its SSE3 kernels gave 24.8
// GFLOP/s a core at 1024^3 against 152.2 with SkylakeX's, and ResNet-20 ran
// at half the speed (docs/cores/2026-11-28-aa50dd5.md).
const prescott = "Prescott"

// features are the x86 capabilities the choice of kernels depends on, each
// with the OS saving its registers.
type features struct{ avx512bf16, avx512, avx2, avx bool }

func cpuFeatures() features {
	x := cpu.X86
	return features{
		avx512bf16: x.HasAVX512F && x.HasAVX512BW && x.HasAVX512DQ && x.HasAVX512VL && x.HasAVX512BF16,
		avx512:     x.HasAVX512F && x.HasAVX512BW && x.HasAVX512DQ && x.HasAVX512VL,
		avx2:       x.HasAVX2 && x.HasFMA,
		avx:        x.HasAVX,
	}
}

// betterCore is the kernel set to load in place of the one OpenBLAS chose
// (core), or "" to keep it: only where OpenBLAS fell back to Prescott's on
// its own (OPENBLAS_CORETYPE, forced, is the user's to set) and the CPU runs
// better ones. The choice is what OpenBLAS 0.3.25 makes for a CPU it does
// not know: Cooperlake with AVX-512 BF16, SkylakeX with AVX-512, Haswell
// with AVX2 and FMA, Sandybridge with AVX.
func betterCore(forced, core string, f features) string {
	if forced != "" || !strings.EqualFold(core, prescott) {
		return ""
	}
	switch {
	case f.avx512bf16:
		return "Cooperlake"
	case f.avx512:
		return "SkylakeX"
	case f.avx2:
		return "Haswell"
	case f.avx:
		return "Sandybridge"
	}
	return ""
}

// Fallback is a sentence for the job's log when Load replaced OpenBLAS's
// Prescott kernels, or "".
func (i Info) Fallback() string {
	if i.Replaced == "" {
		return ""
	}
	if strings.EqualFold(i.Core, i.Replaced) {
		return fmt.Sprintf("OpenBLAS does not know this CPU and kept its %s kernels though loaded again to change them: set OPENBLAS_CORETYPE to the kernels the CPU runs (SkylakeX for AVX-512, Haswell for AVX2)", i.Core)
	}
	return fmt.Sprintf("OpenBLAS did not know this CPU and chose its %s kernels; loaded again with OPENBLAS_CORETYPE=%s, by the CPU's features", i.Replaced, i.Core)
}

// Narrowed is a sentence for the job's log when OPENBLAS_CORETYPE holds
// OpenBLAS to kernels without AVX-512 on a CPU that has it (and the OS
// saves its registers), or "". Left alone, Debian's OpenBLAS picks its
// AVX-512 kernels on this project's Zen 5 machine (and on Intel's AVX-512
// parts, by its own table); a shell that exports OPENBLAS_CORETYPE=Haswell
// (this project's own machines did) nearly halves SGEMM on a Zen 5 core:
// 103 to 107 against 162 to 200 GFLOP/s at 1024^3, 68 against 110 to 140
// at 196x16x16, one thread (scripts/bench/machine-probe.sh).
func (i Info) Narrowed() string {
	return narrowed(i.Forced, i.Core, cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512VL)
}

// avx512Cores are OpenBLAS's x86 kernel sets built on AVX-512, as its
// openblas_get_corename spells them.
var avx512Cores = map[string]bool{"skylakex": true, "cooperlake": true, "sapphirerapids": true}

func narrowed(forced, core string, avx512 bool) string {
	if forced == "" || !avx512 || avx512Cores[strings.ToLower(core)] {
		return ""
	}
	return fmt.Sprintf("OPENBLAS_CORETYPE=%s holds OpenBLAS to its %s kernels on this AVX-512 CPU: unset it to let OpenBLAS choose", forced, core)
}

var (
	mu       sync.Mutex
	loaded   bool
	forced   string // OPENBLAS_CORETYPE when the library loaded
	replaced string // the kernels OpenBLAS chose, where Load chose others
)

// Load opens OpenBLAS (path, or Library when empty), sets its thread
// count, and installs it with blas32.Use. On error nothing changes and the
// caller keeps gonum's implementation.
func Load(path string, threads int) (Info, error) {
	mu.Lock()
	defer mu.Unlock()
	if path == "" {
		path = Library
	}
	if threads < 1 {
		threads = 1
	}
	if !loaded {
		// OpenBLAS starts its thread pool when it is loaded, sized from
		// this variable: set it first so it never starts more.
		os.Setenv("OPENBLAS_NUM_THREADS", strconv.Itoa(threads))
		forced = os.Getenv("OPENBLAS_CORETYPE")
		if err := open(path); err != nil {
			return Info{}, err
		}
		if want := betterCore(forced, corename(), cpuFeatures()); want != "" {
			replaced = corename()
			if err := reopen(path, want); err != nil {
				return Info{}, err
			}
		}
		loaded = true
		cblas.Store((*byte)(C.ob_sgemm_ptr()))
	}
	C.ob_set_threads(C.int(threads))
	blas32.Use(Implementation{})
	return Info{
		Core:     corename(),
		Config:   C.GoString(C.ob_config()),
		Threads:  int(C.ob_get_threads()),
		Forced:   forced,
		Replaced: replaced,
	}, nil
}

func open(path string) error {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var buf [512]C.char
	if C.ob_load(cpath, &buf[0], C.int(len(buf))) != 0 {
		return fmt.Errorf("OpenBLAS: %s", C.GoString(&buf[0]))
	}
	return nil
}

func corename() string { return C.GoString(C.ob_corename()) }

// reopen closes the library and opens it again with OPENBLAS_CORETYPE set
// to core: OpenBLAS reads the variable only while it starts. The variable
// is unset again afterwards, so that nothing this process starts inherits
// a choice made for this CPU. Where the library did not unload (another
// user of it in the process), its kernels stay as they were: Info says so.
func reopen(path, core string) error {
	C.ob_unload()
	os.Setenv("OPENBLAS_CORETYPE", core)
	defer os.Unsetenv("OPENBLAS_CORETYPE")
	return open(path)
}

// Core is the kernel set the loaded library runs ("Cooperlake"), "" before
// Load succeeds.
func Core() string {
	mu.Lock()
	defer mu.Unlock()
	if !loaded {
		return ""
	}
	return corename()
}

// CblasSgemm is the loaded library's cblas_sgemm, for C code that calls
// it directly (the model's thread pool, which holds OpenBLAS to one
// thread and cuts the products itself); nil before Load succeeds.
// It is read on every matrix product, so it takes no lock.
func CblasSgemm() unsafe.Pointer { return unsafe.Pointer(cblas.Load()) }

// cblas is cblas_sgemm once Load succeeded.
var cblas atomic.Pointer[byte]

// Implementation is gonum's pure-Go blas.Float32 with Sgemm from OpenBLAS.
// Use it only after Load succeeded.
type Implementation struct{ gonum.Implementation }

// Sgemm computes c = alpha * op(a) * op(b) + beta * c on row-major data,
// like gonum's; it panics (as gonum does) on shapes the slices cannot
// hold, before C ever reads them.
func (Implementation) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	ta, tb := tA != blas.NoTrans, tB != blas.NoTrans
	rowsA, colsA := m, k
	if ta {
		rowsA, colsA = k, m
	}
	rowsB, colsB := k, n
	if tb {
		rowsB, colsB = n, k
	}
	switch {
	case m < 0 || n < 0 || k < 0:
		panic("openblas: negative dimension")
	case lda < max(1, colsA) || ldb < max(1, colsB) || ldc < max(1, n):
		panic("openblas: bad leading dimension")
	case m == 0 || n == 0:
		return
	case (k > 0 && (len(a) < (rowsA-1)*lda+colsA || len(b) < (rowsB-1)*ldb+colsB)) || len(c) < (m-1)*ldc+n:
		panic("openblas: short slice")
	}
	var pa, pb *C.float
	if k > 0 {
		pa, pb = (*C.float)(&a[0]), (*C.float)(&b[0])
	}
	C.ob_sgemm(boolInt(ta), boolInt(tb), C.int(m), C.int(n), C.int(k), C.float(alpha),
		pa, C.int(lda), pb, C.int(ldb), C.float(beta), (*C.float)(&c[0]), C.int(ldc))
}

func boolInt(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
