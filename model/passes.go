package model

/*
#include "kernels.h"
*/
import "C"

import (
	"cmp"
	"debug/elf"
	"os"
	"slices"
	"sort"
	"strconv"
	"time"
	"unsafe"
)

// Pass is one kind of pass in the pass profile (par.c): the task that
// ran (its C function's name) and the units it was cut into, how many
// such passes ran, their time as the caller saw it, and how much of it
// the caller spent waiting, its own share done, for the other threads
// (the pass's tail). Work is the units' time on one thread, where it is
// known: a pass run on the caller alone, and a simulated one
// (SimulateThreads), whose Total is its time at the simulated count.
type Pass struct {
	Task              string
	Units             int
	Count             int
	Total, Wait, Work time.Duration
}

// ProfilePasses empties the pass profile and turns it on or off; call
// it between steps (train bench step --passes).
func ProfilePasses(on bool) {
	v := 0
	if on {
		v = 1
	}
	C.k_pass_profile(C.int(v))
}

// Passes reads the pass profile, the longest first. The tasks are named
// from this executable's symbol table; a stripped one gives addresses.
func Passes() []Pass {
	var out []Pass
	var addrs []uintptr
	for i := 0; ; i++ {
		var fn unsafe.Pointer
		var units C.size_t
		var n C.ulong
		var total, wait, work C.double
		if C.k_pass_profile_entry(C.int(i), &fn, &units, &n, &total, &wait, &work) == 0 {
			break
		}
		out = append(out, Pass{Units: int(units), Count: int(n), Total: time.Duration(float64(total) * 1e9),
			Wait: time.Duration(float64(wait) * 1e9), Work: time.Duration(float64(work) * 1e9)})
		addrs = append(addrs, uintptr(fn))
	}
	names := symbolize(addrs)
	for i := range out {
		out[i].Task = names[i]
	}
	slices.SortStableFunc(out, func(a, b Pass) int { return cmp.Compare(b.Total, a.Total) })
	return out
}

// Gap is the caller's time between two passes, summed over the times
// one pass of From (cut into FromUnits) was followed by one of To: the
// serial work of a step, placed by the passes around it (par.c's
// prof_gap). A step's first pass follows the last of the step before.
type Gap struct {
	From, To           string
	FromUnits, ToUnits int
	Count              int
	Time               time.Duration
}

// Gaps reads the gaps between passes of the pass profile, the longest
// first.
func Gaps() []Gap {
	var out []Gap
	var addrs []uintptr
	for i := 0; ; i++ {
		var from, to unsafe.Pointer
		var fu, tu C.size_t
		var n C.ulong
		var t C.double
		if C.k_pass_gap_entry(C.int(i), &from, &fu, &to, &tu, &n, &t) == 0 {
			break
		}
		out = append(out, Gap{FromUnits: int(fu), ToUnits: int(tu), Count: int(n), Time: time.Duration(float64(t) * 1e9)})
		addrs = append(addrs, uintptr(from), uintptr(to))
	}
	names := symbolize(addrs)
	for i := range out {
		out[i].From, out[i].To = names[2*i], names[2*i+1]
	}
	slices.SortStableFunc(out, func(a, b Gap) int { return cmp.Compare(b.Time, a.Time) })
	return out
}

// symbolize names each address by the function symbol that holds it in
// this executable (the C tasks are static functions: the symbol table
// has them, the dynamic one does not), or writes it in hex.
func symbolize(addrs []uintptr) []string {
	names := make([]string, len(addrs))
	for i, a := range addrs {
		names[i] = "0x" + strconv.FormatUint(uint64(a), 16)
	}
	exe, err := os.Executable()
	if err != nil {
		return names
	}
	f, err := elf.Open(exe)
	if err != nil {
		return names
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		return names
	}
	funcs := slices.DeleteFunc(syms, func(s elf.Symbol) bool { return elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Value == 0 })
	slices.SortFunc(funcs, func(a, b elf.Symbol) int { return cmp.Compare(a.Value, b.Value) })
	// A position-independent executable loads at an offset: the one of a
	// function both sides know.
	var bias uint64
	if k := slices.IndexFunc(funcs, func(s elf.Symbol) bool { return s.Name == "k_pass_profile" }); k >= 0 {
		bias = uint64(uintptr(unsafe.Pointer(C.k_pass_profile))) - funcs[k].Value
	}
	for i, a := range addrs {
		v := uint64(a) - bias
		j := sort.Search(len(funcs), func(j int) bool { return funcs[j].Value > v }) - 1
		if j >= 0 && v < funcs[j].Value+max(funcs[j].Size, 1) {
			names[i] = funcs[j].Name
		}
	}
	return names
}
