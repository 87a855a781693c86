package data

import (
	"fmt"
	"strconv"
	"strings"
)

// ExpandBraces expands a shard pattern as WebDataset's braceexpand
// does: "train-{000000..000511}.tar" is 512 names, zero-padded to the
// first bound's width; "{a,b}" is a list; several braces multiply, the
// leftmost varying slowest. A pattern without braces is itself.
func ExpandBraces(pattern string) ([]string, error) {
	open := strings.IndexByte(pattern, '{')
	if open < 0 {
		if strings.IndexByte(pattern, '}') >= 0 {
			return nil, fmt.Errorf("shard pattern %q: a '}' without its '{'", pattern)
		}
		return []string{pattern}, nil
	}
	end := strings.IndexByte(pattern[open:], '}')
	if end < 0 {
		return nil, fmt.Errorf("shard pattern %q: a '{' without its '}'", pattern)
	}
	end += open
	inner := pattern[open+1 : end]
	if strings.IndexByte(inner, '{') >= 0 {
		return nil, fmt.Errorf("shard pattern %q: nested braces are not expanded", pattern)
	}
	var alts []string
	if lo, hi, ok := strings.Cut(inner, ".."); ok {
		a, errA := strconv.Atoi(lo)
		b, errB := strconv.Atoi(hi)
		if errA != nil || errB != nil || a < 0 || b < a {
			return nil, fmt.Errorf("shard pattern %q: {%s} is not a range of numbers LOW..HIGH", pattern, inner)
		}
		if b-a >= 1<<20 {
			return nil, fmt.Errorf("shard pattern %q: {%s} names more than a million shards", pattern, inner)
		}
		for i := a; i <= b; i++ {
			alts = append(alts, fmt.Sprintf("%0*d", len(lo), i))
		}
	} else {
		alts = strings.Split(inner, ",")
	}
	rest, err := ExpandBraces(pattern[end+1:])
	if err != nil {
		return nil, err
	}
	var out []string
	for _, a := range alts {
		for _, r := range rest {
			out = append(out, pattern[:open]+a+r)
		}
	}
	return out, nil
}
