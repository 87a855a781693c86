package params

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"
)

// TestHugeFloats: with UseHugePages on, a large buffer comes back zeroed, of its length, with
// its whole 2 MiB pages advised MADV_HUGEPAGE (the "hg" flag of its
// mapping in /proc/self/smaps) before anything touched them; a small one
// is left alone, as is every buffer with it off.
func TestHugeFloats(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage"); err != nil {
		t.Skipf("this kernel has no transparent huge pages (%v): MADV_HUGEPAGE is refused and hugeFloats is make", err)
	}
	// Off (the default): no advice.
	off := hugeFloats(3 << 20)
	if flags, err := vmFlags((uintptr(unsafe.Pointer(&off[0])) + 2<<20 - 1) &^ (2<<20 - 1)); err != nil || strings.Contains(" "+flags+" ", " hg ") {
		t.Errorf("UseHugePages off: VmFlags %q (%v), want no hg", flags, err)
	}
	UseHugePages(true)
	defer UseHugePages(false)
	big := hugeFloats(3<<20 + 5) // 12 MiB and 20 bytes: 5 whole huge pages inside
	if len(big) != 3<<20+5 {
		t.Fatalf("len %d", len(big))
	}
	const huge = 2 << 20
	addr := uintptr(unsafe.Pointer(&big[0]))
	inside := (addr + huge - 1) &^ (huge - 1) // the first whole huge page
	flags, err := vmFlags(inside)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(" "+flags+" ", " hg ") {
		t.Errorf("the mapping at %#x (inside a 12 MiB buffer) has VmFlags %q, want hg (MADV_HUGEPAGE)", inside, flags)
	}
	for i, v := range big {
		if v != 0 {
			t.Fatalf("element %d is %v, want 0", i, v)
		}
	}
	small := hugeFloats(1 << 10)
	if len(small) != 1<<10 {
		t.Fatalf("small: len %d", len(small))
	}
}

// vmFlags returns the VmFlags line of the mapping of /proc/self/smaps
// that holds addr.
func vmFlags(addr uintptr) (string, error) {
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return "", err
	}
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		var lo, hi uintptr
		// A mapping's first line starts "lo-hi perms"; its fields
		// ("Size:", "VmFlags:") do not parse as two hex numbers.
		if n, _ := fmt.Sscanf(l, "%x-%x ", &lo, &hi); n == 2 {
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(l, "VmFlags:") {
			return strings.TrimSpace(strings.TrimPrefix(l, "VmFlags:")), nil
		}
	}
	return "", fmt.Errorf("no mapping holds %#x in /proc/self/smaps", addr)
}
