package params

import (
	"syscall"
	"unsafe"
)

// hugeBytes is the size from which a flat buffer asks for 2 MiB pages.
const hugeBytes = 4 << 20

// hugePages is UseHugePages's switch.
var hugePages bool

// UseHugePages makes this process's flat parameter and gradient buffers
// ask for huge pages (hugeFloats). The trainer turns it on for ZeRO
// stages 2 and 3 only: a GPT of 6 layers, dim 384, context 256 ran 0.92
// times as fast with huge pages under plain data parallelism
// (scripts/bench/ab-step.sh, np=1, --threads 2, 4 rounds, none faster),
// and on the Zen 5 VM 0.81 with every activation, gradient and scratch
// buffer of the model advised as well (docs/cpu-speed.md, the 48th
// session), though the system-wide setting "always" sped it 1.04.
func UseHugePages(on bool) { hugePages = on }

// hugeFloats allocates n float32s, and when they are large (and
// UseHugePages is on) asks the
// kernel to back them with transparent huge pages (MADV_HUGEPAGE, which
// Linux honours when /sys/kernel/mm/transparent_hugepage/enabled is
// "madvise" or "always"; Debian's default is "madvise"). The advice must
// come before the first touch: pages already faulted in at 4 KiB keep
// their page table. Why: ZeRO stages 2 and 3 hand the pages outside a
// rank's shard back to the kernel every step (MADV_DONTNEED) and fault
// them in again; a 4 KiB fault cost 10 to 14 us on the machine of the
// README's figures and a 2 MiB one 0.2 to 0.3 us per 4 KiB of it
// (scripts/bench/machine-probe.sh, docs/BENCHMARKS.md). A whole huge page
// handed back is faulted in again as one; one cut by a shard's edge
// splits into 4 KiB pages, as before.
func hugeFloats(n int) []float32 {
	buf := make([]float32, n)
	if !hugePages || 4*n < hugeBytes {
		return buf
	}
	const huge = 2 << 20
	base := uintptr(unsafe.Pointer(&buf[0]))
	skip := (huge - base%huge) % huge
	bytes := (uintptr(4*n) - skip) / huge * huge
	if bytes > 0 {
		// Advice only: on failure the buffer is as make returned it.
		_ = syscall.Madvise(unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(&buf[0]), skip)), bytes), syscall.MADV_HUGEPAGE)
	}
	return buf
}
