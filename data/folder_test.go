package data

import (
	"image"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestScanFolder: torchvision's ImageFolder order, worked out by hand for
// this tree: classes by name, each class's directories by path and files
// by name, image extensions in any case, other files left out, symbolic
// links to class folders followed.
func TestScanFolder(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"dog/b.jpg", "dog/a.PNG", "dog/notes.txt", "dog/sub/z.jpeg", "dog/a-sub/y.png", "cat/1.jpg", "other/x.webp"} {
		full := filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		os.WriteFile(full, []byte("x"), 0o644)
	}
	os.Symlink(filepath.Join(root, "cat"), filepath.Join(root, "bird"))
	f, err := ScanFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.Classes, []string{"bird", "cat", "dog", "other"}) {
		t.Errorf("classes %v", f.Classes)
	}
	var got []string
	for i, p := range f.Paths {
		rel, _ := filepath.Rel(root, p)
		got = append(got, rel+"="+f.Classes[f.Labels[i]])
	}
	want := []string{"bird/1.jpg=bird", "cat/1.jpg=cat", "dog/a.PNG=dog", "dog/b.jpg=dog", "dog/a-sub/y.png=dog", "dog/sub/z.jpeg=dog", "other/x.webp=other"}
	if !slices.Equal(got, want) {
		t.Errorf("samples\n got %v\nwant %v", got, want)
	}
	for _, c := range []struct{ make, want string }{{"", "no class folders"}, {"empty", `class "empty" has no image files`}} {
		d := t.TempDir()
		if c.make != "" {
			os.Mkdir(filepath.Join(d, c.make), 0o755)
			os.WriteFile(filepath.Join(d, c.make, "readme.txt"), nil, 0o644)
		}
		if _, err := ScanFolder(d); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), d) {
			t.Errorf("%q: error %v, want one naming %s and %q", c.make, err, d, c.want)
		}
	}
}

// TestImageSetUsed: with Skip, a file that does not decode is replaced by
// the next one in the folder's order, and Used names the replacement.
func TestImageSetUsed(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "a"), 0o755)
	for _, n := range []string{"1.png", "3.png"} {
		f, _ := os.Create(filepath.Join(root, "a", n))
		png.Encode(f, image.NewGray(image.Rect(0, 0, 9, 9)))
		f.Close()
	}
	os.WriteFile(filepath.Join(root, "a", "2.png"), []byte("not a PNG"), 0o644)
	f, err := ScanFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	var skipped []string
	set := &ImageSet{Folder: f, View: View{Size: 8, Resize: 8, Std: [3]float32{1, 1, 1}, Workers: 1,
		Skip: func(p string, _ error) { skipped = append(skipped, p) }}}
	x, y := make([]float32, 2*3*64), make([]int32, 2)
	if err := set.Batch(x, y, []int{0, 1}, 0); err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "a", "2.png"); !slices.Equal(skipped, []string{want}) {
		t.Errorf("skipped %v, want [%s]", skipped, want)
	}
	if got, want := set.Used(1), filepath.Join(root, "a", "3.png"); got != want {
		t.Errorf("Used(1) = %s, want %s", got, want)
	}
	if got, want := set.Used(0), filepath.Join(root, "a", "1.png"); got != want {
		t.Errorf("Used(0) = %s, want %s", got, want)
	}
}
