package data

import (
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
