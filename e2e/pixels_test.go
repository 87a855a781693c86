package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"train/data"
	"train/internal/near"
)

// TestPILResize (issue 20, "pixels"): data.Resize gives Pillow's bytes
// exactly (Image.resize with BILINEAR, what torchvision's Resize and
// RandomResizedCrop do to PIL images) for RGB and greyscale images from
// 5x7 to 500x375, shrunk, enlarged, and shrunk along one side while
// enlarged along the other (scripts/pil_reference.py, Debian's
// python3-pil).
func TestPILResize(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	if out, err := exec.Command("/usr/bin/python3", "scripts/pil_reference.py", "resize", dir).CombinedOutput(); err != nil {
		t.Fatalf("pil_reference.py (python3-pil and python3-numpy; scripts/setup.sh --test installs them): %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct{ W, H, C, OW, OH int }
	if err := json.Unmarshal(b, &cases); err != nil || len(cases) == 0 {
		t.Fatalf("cases.json: %v (%d cases)", err, len(cases))
	}
	for i, c := range cases {
		in, err1 := os.ReadFile(filepath.Join(dir, "in-"+itoa(i)+".raw"))
		want, err2 := os.ReadFile(filepath.Join(dir, "out-"+itoa(i)+".raw"))
		if err1 != nil || err2 != nil || len(in) != c.W*c.H*c.C || len(want) != c.OW*c.OH*c.C {
			t.Fatalf("case %d %+v: files %v %v", i, c, err1, err2)
		}
		got := data.Resize(nil, in, c.W, c.H, c.C, c.OW, c.OH)
		diff, at := 0, -1
		for j := range want {
			if d := int(got[j]) - int(want[j]); d != 0 {
				diff++
				if at < 0 {
					at = j
				}
			}
		}
		if diff > 0 {
			t.Errorf("%dx%dx%d to %dx%d: %d of %d bytes differ from Pillow's, first at %d: %d, Pillow %d",
				c.W, c.H, c.C, c.OW, c.OH, diff, len(want), at, got[at], want[at])
		}
	}
	t.Logf("%d resizes, every byte Pillow's", len(cases))
}

// TestPILDecode (issue 20, "pixels"): data.DecodeRGB against Pillow's
// Image.open(f).convert("RGB") (torchvision's loader) on real
// Fashion-MNIST and CIFAR-10 images, enlarged past 500 pixels too, saved
// by scripts/pil_reference.py as PNG of every kind (RGB, RGBA, L, LA,
// palette, palette with transparency, 16-bit greyscale): every byte
// Pillow's; and JPEG (baseline 4:4:4 and 4:2:0, progressive, greyscale,
// CMYK) within one grey level, decoded by libjpeg-turbo (Pillow's own
// decoder; Go's image/jpeg misses that by up to 43 levels on 4:2:0);
// WebP (lossless and lossy, RGB and RGBA; libwebp, Pillow's decoder),
// BMP (RGB, greyscale, palette) and TIFF (RGB, LZW, greyscale, RGBA)
// exactly. Broken files (truncated JPEG, PNG and WebP, text, empty) and
// those train does not read (PPM) are one error naming the file.
func TestPILDecode(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	if out, err := exec.Command("/usr/bin/python3", "scripts/pil_reference.py", "decode", dir, fashion, "testdata/cifar10-mini").CombinedOutput(); err != nil {
		t.Fatalf("pil_reference.py: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		File   string
		Broken bool
		W, H   int
	}
	if err := json.Unmarshal(b, &cases); err != nil || len(cases) == 0 {
		t.Fatalf("cases.json: %v", err)
	}
	worst, sum, count := map[string]int{}, map[string]int{}, map[string]int{}
	for _, c := range cases {
		path := filepath.Join(dir, c.File)
		pix, w, h, err := data.DecodeRGB(path)
		if c.Broken {
			if err == nil || !strings.HasPrefix(err.Error(), path+": ") {
				t.Errorf("%s: error %v, want one naming the file", c.File, err)
			}
			continue
		}
		if err != nil || w != c.W || h != c.H {
			t.Errorf("%s: %dx%d, %v; Pillow %dx%d", c.File, w, h, err, c.W, c.H)
			continue
		}
		want, _ := os.ReadFile(path + ".raw")
		kind := c.File[strings.LastIndex(c.File, "-")+1:]
		d := 0
		for i := range want {
			e := abs(int(pix[i]) - int(want[i]))
			d = max(d, e)
			sum[kind] += e
		}
		count[kind] += len(want)
		worst[kind] = max(worst[kind], d)
	}
	t.Logf("JPEG decoder: %s", data.JPEGDecoder())
	for kind, d := range worst {
		mean := float64(sum[kind]) / float64(count[kind])
		t.Logf("%s: largest difference from Pillow %d grey levels, mean %.3f", kind, d, mean)
		switch {
		case strings.HasSuffix(kind, ".jpg"):
			if d > 1 {
				t.Errorf("%s: pixels differ from Pillow's by up to %d grey levels (JPEG within 1)", kind, d)
			}
		case d != 0:
			t.Errorf("%s: pixels differ from Pillow's by up to %d grey levels (PNG, WebP, BMP and TIFF must be exact)", kind, d)
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// TestTorchvisionTransforms (issue 20, "augmentation"): for the same crop
// box and flip, data.TrainCrop gives torchvision's resized_crop (and
// hflip) bytes exactly, and data.EvalCrop its Resize then CenterCrop
// (enlarging included, and a crop larger than the image, padded), on
// real Fashion-MNIST and CIFAR-10 images from 28x28 to 600x600
// (scripts/pil_reference.py transforms, torchvision 0.14's PIL path);
// data.Normalize gives its ToTensor then Normalize floats exactly.
func TestTorchvisionTransforms(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	if out, err := exec.Command("/usr/bin/python3", "scripts/pil_reference.py", "transforms", dir, fashion, "testdata/cifar10-mini").CombinedOutput(); err != nil {
		t.Fatalf("pil_reference.py: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Img, W, H    int
		Kind         string
		Box          [4]int
		Size, Resize int
		Flip, Norm   bool
	}
	if err := json.Unmarshal(b, &cases); err != nil || len(cases) == 0 {
		t.Fatalf("cases.json: %v", err)
	}
	for i, c := range cases {
		img, _ := os.ReadFile(filepath.Join(dir, "img-"+itoa(c.Img)+".raw"))
		want, _ := os.ReadFile(filepath.Join(dir, "out-"+itoa(i)+".raw"))
		var got []uint8
		if c.Kind == "train" {
			got = data.TrainCrop(img, c.W, c.H, data.Box{X: c.Box[0], Y: c.Box[1], Width: c.Box[2], Height: c.Box[3]}, c.Size, c.Flip)
		} else {
			got = data.EvalCrop(img, c.W, c.H, c.Resize, c.Size)
		}
		if len(got) != len(want) || len(want) == 0 {
			t.Errorf("case %d %+v: %d bytes, torchvision %d", i, c, len(got), len(want))
			continue
		}
		for j := range want {
			if got[j] != want[j] {
				t.Errorf("case %d %+v: byte %d is %d, torchvision %d", i, c, j, got[j], want[j])
				break
			}
		}
		if c.Norm {
			nb, _ := os.ReadFile(filepath.Join(dir, "norm.raw"))
			norm := make([]float32, 3*c.Size*c.Size)
			data.Normalize(norm, got, c.Size, c.Size, data.ImageNetMean, data.ImageNetStd)
			if err := near.Check(f32s(nb), norm, 0); err != nil {
				t.Errorf("Normalize: %v", err)
			}
		}
	}
	t.Logf("%d views, every byte torchvision's", len(cases))
}
