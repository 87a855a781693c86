package trainer

import (
	"strings"
	"testing"
)

// TestDiffers: the first option whose value is not rank 0's is named with
// both values; another build (its revision, or another set of options)
// is named as such.
func TestDiffers(t *testing.T) {
	root := []string{"--model mlp", "--lr 0.1", "--seed 1", "build abc"}
	for _, tc := range []struct {
		name string
		mine []string
		want string // "" for no error
	}{
		{"same", []string{"--model mlp", "--lr 0.1", "--seed 1", "build abc"}, ""},
		{"lr", []string{"--model mlp", "--lr 0.2", "--seed 2", "build abc"}, "--lr 0.2 here, --lr 0.1 on rank 0"},
		{"seed", []string{"--model mlp", "--lr 0.1", "--seed 2", "build abc"}, "--seed 2 here, --seed 1 on rank 0"},
		{"revision", []string{"--model mlp", "--lr 0.1", "--seed 1", "build abd"}, "another build of train than rank 0 (build abd here, build abc there)"},
		{"an option rank 0 lacks", []string{"--model mlp", "--lr 0.1", "--seed 1", "--zero 0", "build abc"}, "another build of train"},
		{"fewer options", []string{"--model mlp", "--lr 0.1", "build abc"}, "another build of train"},
		{"nothing to check", nil, "another build of train"},
	} {
		err := differs(tc.mine, root)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
	if err := differs(nil, nil); err != nil {
		t.Errorf("nothing on either side: %v", err)
	}
}
