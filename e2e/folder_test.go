package e2e

import (
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"train/data"
)

// imageFolder writes train/ and val/ image folders of 4 classes from the
// CIFAR-10 sample in testdata: 40 images enlarged (nearest pixel) to
// sizes from 40x28 to 89x124, half PNG and half JPEG; every fourth of a
// class goes to val/.
func imageFolder(t *testing.T, dir string) {
	t.Helper()
	train, test, err := data.LoadCIFAR("testdata/cifar10-mini")
	if err != nil {
		t.Fatal(err)
	}
	classes := []string{"airplane", "automobile", "bird", "cat"}
	seen := map[int]int{}
	n := 0
	for _, d := range []*data.Dataset{train, test} {
		for i := range d.N {
			lab := int(d.Labels[i]) % 4
			seen[lab]++
			split := "train"
			if seen[lab]%4 == 0 {
				split = "val"
			}
			w, h := 40+(n*7)%50, 28+(n*13)%97
			img := image.NewRGBA(image.Rect(0, 0, w, h))
			px := d.Images[i*d.SampleSize() : (i+1)*d.SampleSize()]
			for y := range h {
				for x := range w {
					sy, sx := y*32/h, x*32/w
					img.SetRGBA(x, y, color.RGBA{px[sy*32+sx], px[1024+sy*32+sx], px[2048+sy*32+sx], 255})
				}
			}
			sub := filepath.Join(dir, split, classes[lab])
			os.MkdirAll(sub, 0o755)
			f, err := os.Create(filepath.Join(sub, fmt.Sprintf("%05d.%s", n, map[bool]string{true: "png", false: "jpg"}[n%2 == 0])))
			if err != nil {
				t.Fatal(err)
			}
			if n%2 == 0 {
				err = png.Encode(f, img)
			} else {
				err = jpeg.Encode(f, img, &jpeg.Options{Quality: 90})
			}
			if err != nil || f.Close() != nil {
				t.Fatal(err)
			}
			n++
		}
	}
}

// TestImageFolderEquivalence (issue 20, "equivalence"): training from an
// image folder, with RandomResizedCrop and flip drawn per (seed, epoch,
// sample), np=2 with batch 4 ends within 1e-5 of np=1 with batch 8
// (synchronised BatchNorm), and a run stopped mid-epoch and resumed ends
// on the straight run's checkpoint byte for byte.
func TestImageFolderEquivalence(t *testing.T) {
	e2e(t)
	dir := t.TempDir()
	folder := filepath.Join(dir, "images")
	imageFolder(t, folder)
	args := []string{"--model", "resnet-cifar", "--depth", "8", "--data", folder, "--image-size", "32", "--max-steps", "8", "--log-every", "1", "--seed", "3"}
	r1, one := trainAt(t, 1, 1, dir, "np1", 8, append(args, "--batch-size", "8")...)
	_, two := trainAt(t, 2, 2, dir, "np2", 8, append(args, "--batch-size", "4")...)
	sameTensors(t, "np=2 against np=1", one, two, 1e-5)
	if want := "image folders " + folder + "/train and " + folder + "/val: 30 training and 10 validation images in 4 classes"; !strings.Contains(r1.stdout, want) {
		t.Errorf("the log lacks %q:\n%s", want, r1.stdout)
	}
	// A file that does not decode: train data check names it (exit 1); in
	// training, one line naming it and the job stops;
	// with --skip-bad, a warning naming it, the same replacement on every
	// np (np=2 still within 1e-5 of np=1), and the same step count.
	bad := filepath.Join(folder, "train", "cat", "zz-broken.jpg")
	if err := os.WriteFile(bad, []byte("not a JPEG"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := trainRun(t, 0, time.Minute, nil, "data", "check", folder); r.code != 1 || !strings.Contains(r.stdout, bad+": ") ||
		!strings.Contains(r.stdout, "/train: 31 images in 4 classes, 1 that do not decode") {
		t.Errorf("train data check: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := trainRun(t, 2, time.Minute, nil, append(args, "--batch-size", "4")...)
	if lines := trainLines(r.stderr); r.code == 0 || len(lines) != 1 || !strings.Contains(lines[0], bad+": ") {
		t.Errorf("a broken image: exit %d, lines %q", r.code, lines)
	}
	noTrace(t, r)
	skip := append(args, "--skip-bad")
	s1, one := trainAt(t, 1, 1, dir, "skip1", 8, append(skip, "--batch-size", "8")...)
	_, two = trainAt(t, 2, 2, dir, "skip2", 8, append(skip, "--batch-size", "4")...)
	sameTensors(t, "--skip-bad, np=2 against np=1", one, two, 1e-5)
	if !strings.Contains(s1.stderr, "skipping an image that does not decode (--skip-bad; 1 on this rank so far): "+bad) {
		t.Errorf("no warning naming %s:\n%s", bad, s1.stderr)
	}
	os.Remove(bad)
	// 30 images at batch 4 on 2 ranks: 3 steps an epoch, 60 steps stop
	// and resume at step 30 in the middle of epoch 11.
	if !resumeIsExact(t, 2, "--model", "resnet-cifar", "--depth", "8", "--data", folder, "--image-size", "24", "--batch-size", "4", "--log-every", "10", "--epochs", "25") {
		t.Error("resumed mid-epoch, the run ends on other parameters than the straight one")
	}
}
