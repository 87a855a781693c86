package gpu

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoDriver: where the driver library is missing (every CI machine;
// here a path where none is, so the GPU machine sees it too), asking for
// a GPU is an error that says what is missing, never a crash. Run in a
// child process, since the driver is opened once per process.
func TestNoDriver(t *testing.T) {
	if os.Getenv("GPU_TEST_CHILD") == "" {
		exe, _ := os.Executable()
		cmd := exec.Command(exe, "-test.run", "^TestNoDriver$", "-test.v")
		cmd.Env = append(os.Environ(), "GPU_TEST_CHILD="+filepath.Join(t.TempDir(), "libcuda.so.1"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "--- PASS: TestNoDriver") {
			t.Fatalf("child did not pass:\n%s", out)
		}
		return
	}
	missing := os.Getenv("GPU_TEST_CHILD")
	if _, err := Open(0, "fp32", Options{Libraries: Libraries{CUDA: missing}}); err == nil || !strings.Contains(err.Error(), "no CUDA driver") || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Open with --libcuda %s: %v", missing, err)
	}
	_, err := Count() // the process's one attempt failed: so does every later call
	if err == nil || !strings.Contains(err.Error(), "no CUDA driver") || !strings.Contains(err.Error(), "libcuda.so.1") {
		t.Fatalf("Count without a driver: %v", err)
	}
	if _, err := ForLocalRank(3); err == nil {
		t.Fatal("ForLocalRank without a driver succeeded")
	}
}

// TestDevices lists the GPUs where a driver is present.
func TestDevices(t *testing.T) {
	n, err := Count()
	if err != nil {
		t.Skipf("no GPU here (%v): the device tests run on the GPU machine", err)
	}
	if n < 1 {
		t.Fatal("driver loaded but no device")
	}
	for i := range n + 1 {
		d, err := ForLocalRank(i)
		if err != nil || d.Ordinal != i%n || d.Name == "" || d.Major < 3 || d.Memory == 0 {
			t.Errorf("local rank %d: %v %v", i, d, err)
		}
		t.Log(d)
	}
}
