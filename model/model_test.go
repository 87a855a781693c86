package model

import (
	"strings"
	"testing"
)

// TestSmallImages: a model whose layers would shrink the image to nothing
// is refused by Build with the size it needs; the smallest size it takes
// builds and runs a forward pass.
func TestSmallImages(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string // "" builds
	}{
		{Config{Kind: "cnn", Input: [3]int{1, 3, 3}, Classes: 2}, "the CNN needs images of at least 4x4, not 3x3"},
		{Config{Kind: "cnn", Input: [3]int{1, 8, 1}, Classes: 2}, "the CNN needs images of at least 4x4, not 8x1"},
		{Config{Kind: "cnn", Input: [3]int{1, 4, 4}, Classes: 2}, ""},
		{Config{Kind: "resnet", Depth: 18, Input: [3]int{3, 31, 32}, Classes: 2}, "ResNet-18 needs images of at least 32x32, not 31x32"},
	} {
		m, err := Build(tc.cfg)
		switch {
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: got %v, want %q", tc.cfg.Input, err, tc.want)
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.cfg.Input, err)
		case tc.want == "":
			m.Init(1)
			in := tc.cfg.Input[0] * tc.cfg.Input[1] * tc.cfg.Input[2]
			out := m.Forward(make([]float32, 2*in), 2)
			if len(out) != 2*tc.cfg.Classes {
				t.Errorf("%v: %d outputs for 2 images of %d classes", tc.cfg.Input, len(out), tc.cfg.Classes)
			}
		}
	}
}
