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
// Busy is every thread's time in its chunks, summed over the threads
// (the units' time on one thread, for a pass run on one), and Late the
// workers' delays from the pass's start to their first chunk, summed
// over the Workers that took part (the threads but the caller): the
// two parts of Wait that a thread count can change, work that grew
// and threads that came late (par.c's ptimes).
type Pass struct {
	Task              string
	Units             int
	Count             int
	Total, Wait, Work time.Duration
	Busy, Late        time.Duration
	Workers           int
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
		var total, wait, work, late, busy C.double
		var workers C.ulong
		if C.k_pass_profile_entry(C.int(i), &fn, &units, &n, &total, &wait, &work, &late, &busy, &workers) == 0 {
			break
		}
		sec := func(s C.double) time.Duration { return time.Duration(float64(s) * 1e9) }
		out = append(out, Pass{Units: int(units), Count: int(n), Total: sec(total), Wait: sec(wait), Work: sec(work),
			Busy: sec(busy), Late: sec(late), Workers: int(workers)})
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
