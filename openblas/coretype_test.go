package openblas

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestNarrowed(t *testing.T) {
	for _, c := range []struct {
		forced, core string
		avx512, want bool
	}{
		{"", "Haswell", true, false},          // the library chose
		{"Haswell", "Haswell", true, true},    // held below the CPU
		{"Zen", "Zen", true, true},            // AVX2 too
		{"Haswell", "Haswell", false, false},  // the CPU has no AVX-512
		{"SkylakeX", "SkylakeX", true, false}, // AVX-512 kernels
		{"cooperlake", "Cooperlake", true, false},
		{"SapphireRapids", "SapphireRapids", true, false},
	} {
		got := narrowed(c.forced, c.core, c.avx512)
		if (got != "") != c.want {
			t.Errorf("narrowed(%q, %q, %v) = %q, want a sentence: %v", c.forced, c.core, c.avx512, got, c.want)
		}
		if got != "" && !strings.Contains(got, "OPENBLAS_CORETYPE="+c.forced) {
			t.Errorf("narrowed(%q, ...) = %q does not name the variable's value", c.forced, got)
		}
	}
}

// TestLoadCoretype loads the real library in child processes (it loads
// once a process) with OPENBLAS_CORETYPE=Haswell and without it: Info
// must report the variable and the kernels it got, and Narrowed must speak
// exactly when the kernel's own list of CPU flags (/proc/cpuinfo, not the
// cpuid reading Narrowed uses) has AVX-512 F, BW, DQ and VL.
func TestLoadCoretype(t *testing.T) {
	if os.Getenv("TRAIN_OB_CHILD") == "1" {
		info, err := Load("", 1)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("child core=%s forced=%s narrowed=%v\n", info.Core, info.Forced, info.Narrowed() != "")
		return
	}
	if _, err := Load("", 1); err != nil {
		t.Fatalf("%v (install libopenblas0 with scripts/setup.sh)", err)
	}
	cpuinfo, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Fatal(err)
	}
	avx512 := true
	for _, f := range []string{"avx512f", "avx512bw", "avx512dq", "avx512vl"} {
		avx512 = avx512 && strings.Contains(string(cpuinfo), " "+f+" ")
	}
	child := func(env ...string) string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLoadCoretype$")
		for _, e := range os.Environ() {
			if !strings.HasPrefix(e, "OPENBLAS_CORETYPE=") {
				cmd.Env = append(cmd.Env, e)
			}
		}
		cmd.Env = append(cmd.Env, append(env, "TRAIN_OB_CHILD=1")...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child %v: %v\n%s", env, err, out)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "child ") {
				return l
			}
		}
		t.Fatalf("child %v printed no result:\n%s", env, out)
		return ""
	}
	if got, want := child("OPENBLAS_CORETYPE=Haswell"), fmt.Sprintf("child core=Haswell forced=Haswell narrowed=%v", avx512); got != want {
		t.Errorf("OPENBLAS_CORETYPE=Haswell: %q, want %q", got, want)
	}
	got := child()
	if !strings.Contains(got, " forced= narrowed=false") {
		t.Errorf("OPENBLAS_CORETYPE unset: %q, want no variable and no sentence", got)
	}
	t.Logf("AVX-512: %v; unset: %s", avx512, got)
}
