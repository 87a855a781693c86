package gpu_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"train/gpu"
	"train/gpu/emu"
)

// emuEnv names the CPU emulator's library (gpu/emu, built by
// TestEmulator) in the child processes that run the GPU tests on it.
const emuEnv = "TRAIN_GPU_EMU"

// emulated is the emulator's library when this process runs on it.
func emulated() string { return os.Getenv(emuEnv) }

// emuLibraries names the emulator for every CUDA library.
func emuLibraries(lib string) gpu.Libraries {
	return gpu.Libraries{CUDA: lib, NVRTC: lib, CUBLAS: lib, CUDNN: lib, NCCL: lib}
}

// TestEmulator runs the GPU path's tests on the CPU emulator of the CUDA
// libraries (gpu/emu): the kernels compiled by g++ and run with CUDA's
// thread, barrier and warp semantics, cuBLAS and cuDNN as plain loops.
// Every machine runs the GPU path's code this way; the GPU machine
// (scripts/gpu-check.sh) runs it on the real libraries. Each test must
// pass, not skip: the emulator is always there. A child process, since
// the driver is opened once per process.
func TestEmulator(t *testing.T) {
	if emulated() != "" {
		t.Skip("already the emulator's child")
	}
	if testing.Short() {
		t.Skip("-short: the emulated GPU tests compile the kernels with g++ (about 15 s in all)")
	}
	if _, err := exec.LookPath("g++"); err != nil {
		if _, gerr := gpu.Count(); gerr == nil {
			t.Skip("no g++ on this GPU machine to build the emulator: the tests above ran on its real GPU instead")
		}
	}
	lib, err := emu.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tests := []string{"TestConformance", "TestOptimizers", "TestGPTConformance"}
	exe, _ := os.Executable()
	cmd := exec.Command(exe, "-test.run", "^("+strings.Join(tests, "|")+")$", "-test.v")
	cmd.Env = append(os.Environ(), emuEnv+"="+lib, "TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the GPU tests on the emulator: %v\n%s", err, out)
	}
	for _, name := range tests {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Errorf("%s did not pass on the emulator", name)
		}
	}
	if strings.Contains(string(out), "--- SKIP") {
		t.Errorf("a test skipped on the emulator")
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("%s", out)
	}
}
