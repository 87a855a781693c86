// Package emu builds the CPU emulator of the CUDA libraries (fake.inc and
// cuda_emu.h; fake.inc says what is emulated and how) for tests: package
// gpu's, and the end-to-end tests that run `train --device cuda` on
// machines without a GPU. It is test tooling: train never loads it unless
// told to with --libcuda and its siblings. fake.inc is C++ under another
// extension, since Go refuses C++ files in a package without cgo.
package emu

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

var (
	//go:embed fake.inc
	fake string
	//go:embed cuda_emu.h
	prelude string
)

// Build compiles the emulator into dir with g++ and returns the shared
// object's path, to pass as every library (gpu.Libraries, or train's
// --libcuda, --libnvrtc, --libcublas and --libcudnn). The kernels it
// compiles later are cached under $TMPDIR.
func Build(dir string) (string, error) {
	if _, err := exec.LookPath("g++"); err != nil {
		return "", fmt.Errorf("g++ is needed to build the CUDA emulator (apt install g++; scripts/setup.sh --test installs it): %v", err)
	}
	h, cc, lib := filepath.Join(dir, "cuda_emu.h"), filepath.Join(dir, "fake.cc"), filepath.Join(dir, "libcudaemu.so")
	if err := os.WriteFile(h, []byte(prelude), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(cc, []byte(fake), 0o644); err != nil {
		return "", err
	}
	cmd := exec.Command("g++", "-std=c++17", "-O2", "-shared", "-fPIC", "-Wall", `-DEMU_PRELUDE="`+h+`"`, "-o", lib, cc, "-ldl")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the CUDA emulator: %v\n%s", err, out)
	}
	return lib, nil
}

// Args are train's options that open the emulator at lib.
func Args(lib string) []string {
	return []string{"--libcuda", lib, "--libnvrtc", lib, "--libcublas", lib, "--libcudnn", lib}
}
