package main

import (
	"strings"
	"testing"
)

func TestHoistFlags(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"train plot run.jsonl -o c.png --width 800", "train plot -o c.png --width 800 run.jsonl"},
		{"train plot --output=c.png run.jsonl", "train plot --output=c.png run.jsonl"},
		{"train plot run.jsonl -- -odd-name.jsonl", "train plot run.jsonl -odd-name.jsonl"},
		{"train --epochs 3", "train --epochs 3"},
		{"train timeline merge a.json b.json -o m.json", "train timeline merge -o m.json a.json b.json"},
		{"train timeline plot m.json --step 3 -o p.png", "train timeline plot --step 3 -o p.png m.json"},
	} {
		got := strings.Join(hoistFlags(strings.Fields(tc.in), hoisted), " ")
		if got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
}
