package optim

import (
	"fmt"
	"slices"
)

// Span is the range [Lo, Hi) of the flat parameter buffer.
type Span struct{ Lo, Hi int }

// segment is a run of parameters that all do, or all do not, take weight
// decay, ending (exclusive) at End.
type segment struct {
	End   int
	Decay bool
}

// segments splits [0, n) at the edges of the spans without decay: what
// the update loops run over, one weight-decay setting per run. The spans
// must be sorted, disjoint and inside [0, n).
func segments(noDecay []Span, n int) ([]segment, error) {
	var segs []segment
	at := 0
	for _, s := range noDecay {
		if s.Lo < at || s.Hi < s.Lo || s.Hi > n {
			return nil, fmt.Errorf("optim: spans without decay %v are not sorted, disjoint and inside [0, %d)", noDecay, n)
		}
		if s.Lo > at {
			segs = append(segs, segment{s.Lo, true})
		}
		if s.Hi > s.Lo {
			segs = append(segs, segment{s.Hi, false})
		}
		at = s.Hi
	}
	if at < n || n == 0 {
		segs = append(segs, segment{n, true})
	}
	return segs, nil
}

// Shard is c for the parameters [lo, hi) alone, as a parameter server
// holding that shard sees them: the spans without decay cut to the shard
// and counted from lo.
func (c Config) Shard(lo, hi int) Config {
	var spans []Span
	for _, s := range c.NoDecay {
		a, b := max(s.Lo, lo), min(s.Hi, hi)
		if a < b {
			spans = append(spans, Span{a - lo, b - lo})
		}
	}
	c.NoDecay = slices.Clip(spans)
	return c
}
