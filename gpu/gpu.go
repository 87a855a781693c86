package gpu

// #cgo LDFLAGS: -ldl
// #include <stdlib.h>
// #include "shim.h"
import "C"

import (
	"fmt"
	"os"
	"sync"
	"unsafe"
)

// Driver is the CUDA driver library train opens; TRAIN_LIBCUDA overrides
// it (tests, unusual installs).
const Driver = "libcuda.so.1"

var (
	loadOnce sync.Once
	loadErr  error
)

// load opens the driver once per process and initialises it. Nothing
// happens until a caller asks for a GPU: no init() side effects.
func load() error {
	loadOnce.Do(func() {
		path := Driver
		if p := os.Getenv("TRAIN_LIBCUDA"); p != "" {
			path = p
		}
		cpath := C.CString(path)
		defer C.free(unsafe.Pointer(cpath))
		var buf [512]C.char
		if C.cu_load(cpath, &buf[0], C.int(len(buf))) != 0 {
			loadErr = fmt.Errorf("no CUDA driver: %s (an NVIDIA GPU and its driver are needed for --device cuda)", C.GoString(&buf[0]))
			return
		}
		loadErr = check("cuInit", C.cu_init())
	})
	return loadErr
}

// check turns a CUresult into an error naming the call.
func check(call string, r C.int) error {
	if r == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s (CUresult %d)", call, C.GoString(C.cu_error_string(r)), int(r))
}

// Count is the number of CUDA devices.
func Count() (int, error) {
	if err := load(); err != nil {
		return 0, err
	}
	var n C.int
	if err := check("cuDeviceGetCount", C.cu_device_count(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// Device describes one GPU.
type Device struct {
	Ordinal      int
	Name         string
	Major, Minor int // compute capability
	Memory       uint64
}

func (d Device) String() string {
	return fmt.Sprintf("GPU %d: %s, compute capability %d.%d, %.1f GiB", d.Ordinal, d.Name, d.Major, d.Minor, float64(d.Memory)/(1<<30))
}

// ForLocalRank picks the device of a node-local rank: local rank modulo the
// device count, so several ranks may share one GPU.
func ForLocalRank(localRank int) (Device, error) {
	n, err := Count()
	if err != nil {
		return Device{}, err
	}
	if n == 0 {
		return Device{}, fmt.Errorf("the CUDA driver sees no GPU")
	}
	return Info(localRank % n)
}

// Info describes device ordinal.
func Info(ordinal int) (Device, error) {
	if err := load(); err != nil {
		return Device{}, err
	}
	var name [256]C.char
	var major, minor C.int
	var mem C.size_t
	if err := check("cuDeviceGet", C.cu_device_info(C.int(ordinal), &name[0], C.int(len(name)), &major, &minor, &mem)); err != nil {
		return Device{}, fmt.Errorf("device %d: %v", ordinal, err)
	}
	return Device{Ordinal: ordinal, Name: C.GoString(&name[0]), Major: int(major), Minor: int(minor), Memory: uint64(mem)}, nil
}
