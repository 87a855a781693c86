package data

import (
	"slices"
	"testing"
)

// The expansions are braceexpand's (the Python package WebDataset uses),
// written out by hand from its documentation.
func TestExpandBraces(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"a.tar", []string{"a.tar"}},
		{"s-{08..11}.tar", []string{"s-08.tar", "s-09.tar", "s-10.tar", "s-11.tar"}},
		{"s-{8..11}.tar", []string{"s-8.tar", "s-9.tar", "s-10.tar", "s-11.tar"}},
		{"{train,val}-{0..1}.tar", []string{"train-0.tar", "train-1.tar", "val-0.tar", "val-1.tar"}},
	} {
		got, err := ExpandBraces(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ExpandBraces(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"s-{1..", "s-}.tar", "s-{3..1}.tar", "s-{a..b}.tar", "{{1..2}}"} {
		if got, err := ExpandBraces(bad); err == nil {
			t.Errorf("ExpandBraces(%q) = %q, want an error", bad, got)
		}
	}
}
