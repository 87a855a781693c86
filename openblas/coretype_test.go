package openblas

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"gonum.org/v1/gonum/blas"
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

// TestBetterCore: the kernels chosen in place of a fallen-back Prescott
// are OpenBLAS 0.3.25's own feature-based choice for a CPU it does not
// know (driver/others/dynamic.c, get_coretype's default: Cooperlake with
// AVX-512 BF16, SkylakeX with AVX-512, Haswell with AVX2, Sandybridge with
// AVX), and nothing changes where OpenBLAS chose otherwise or the user set
// OPENBLAS_CORETYPE.
func TestBetterCore(t *testing.T) {
	all := features{avx512bf16: true, avx512: true, avx2: true, avx: true}
	for _, c := range []struct {
		forced, core string
		f            features
		want         string
	}{
		{"", "Prescott", all, "Cooperlake"},
		{"", "Prescott", features{avx512: true, avx2: true, avx: true}, "SkylakeX"},
		{"", "Prescott", features{avx2: true, avx: true}, "Haswell"},
		{"", "Prescott", features{avx: true}, "Sandybridge"},
		{"", "Prescott", features{}, ""},  // a CPU of Prescott's time
		{"Prescott", "Prescott", all, ""}, // the user's choice
		{"", "Haswell", all, ""},          // OpenBLAS chose
		{"", "Cooperlake", all, ""},
		{"", "Zen", features{avx2: true, avx: true}, ""},
	} {
		if got := betterCore(c.forced, c.core, c.f); got != c.want {
			t.Errorf("betterCore(%q, %q, %+v) = %q, want %q", c.forced, c.core, c.f, got, c.want)
		}
	}
	if s := (Info{Core: "SkylakeX", Replaced: "Prescott"}).Fallback(); !strings.Contains(s, "Prescott") || !strings.Contains(s, "OPENBLAS_CORETYPE=SkylakeX") {
		t.Errorf("Fallback after a reload: %q names neither kernel set", s)
	}
	if s := (Info{Core: "Prescott", Replaced: "Prescott"}).Fallback(); !strings.Contains(s, "set OPENBLAS_CORETYPE") {
		t.Errorf("Fallback when the reload changed nothing: %q does not say what to do", s)
	}
	if s := (Info{Core: "Cooperlake"}).Fallback(); s != "" {
		t.Errorf("Fallback with nothing replaced: %q", s)
	}
}

// TestReopen loads the real library in a child process held to Prescott's
// kernels (as OpenBLAS 0.3.21 falls back on a CPU it does not know), then
// loads it again as Load does: the kernels must change (the library really
// unloaded and started again), products must still be right, and the
// variable must be gone from the environment.
func TestReopen(t *testing.T) {
	if os.Getenv("TRAIN_OB_REOPEN") == "1" {
		if err := open(Library); err != nil {
			t.Fatal(err)
		}
		before := corename()
		if err := reopen(Library, "Haswell"); err != nil {
			t.Fatal(err)
		}
		// A 3x4 by 4x2 product against sums worked by hand.
		a := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
		b := []float32{1, -1, 2, 0.5, -3, 2, 0.25, 4}
		c := make([]float32, 6)
		Implementation{}.Sgemm(blas.NoTrans, blas.NoTrans, 3, 2, 4, 1, a, 4, b, 2, 0, c, 2)
		fmt.Printf("child before=%s after=%s c=%v env=%q\n", before, corename(), c, os.Getenv("OPENBLAS_CORETYPE"))
		return
	}
	cpuinfo, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cpuinfo), " avx2 ") || !strings.Contains(string(cpuinfo), " fma ") {
		t.Skip("this CPU lacks AVX2 or FMA, which Haswell's kernels need: nothing to reload into (not a pass)")
	}
	if _, err := Load("", 1); err != nil {
		t.Fatalf("%v (install libopenblas0 with scripts/setup.sh)", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReopen$")
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "OPENBLAS_CORETYPE=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(cmd.Env, "OPENBLAS_CORETYPE=Prescott", "TRAIN_OB_REOPEN=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	// Row 1 of a times b: 1+4-9+1 = -3 and -1+1+6+16 = 22; row 2: 5+12-21+2
	// and -5+3+14+32; row 3: 9+20-33+3 and -9+5+22+48.
	want := `child before=Prescott after=Haswell c=[-3 22 -2 44 -1 66] env=""`
	if !strings.Contains(string(out), want) {
		t.Errorf("child printed\n%s\nwant the line %s", out, want)
	}
}
