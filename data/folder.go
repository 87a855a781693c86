package data

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Folder is a directory of images in torchvision ImageFolder's
// convention: one sub-folder per class, the classes in name order, and in
// each the image files of any depth below it, the directories in path
// order and the files of each in name order (torchvision's
// make_dataset). The same files in the same order, so a label and a
// sample index mean what they mean to torchvision.
type Folder struct {
	Root    string
	Classes []string // label i is Classes[i]
	Paths   []string // every sample's file
	Labels  []int32
}

// imageExts are torchvision's IMG_EXTENSIONS (matched ignoring case):
// every one is a sample; DecodeRGB reads JPEG, PNG, WebP, BMP and TIFF
// and names the others (PPM, PGM) as not read.
var imageExts = []string{".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"}

func isImage(name string) bool {
	n := strings.ToLower(name)
	for _, e := range imageExts {
		if strings.HasSuffix(n, e) {
			return true
		}
	}
	return false
}

// ScanFolder lists root's classes and samples. A root without class
// folders, or a class folder without an image, is an error naming it.
func ScanFolder(root string) (*Folder, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("image folder %s: %w", root, err)
	}
	f := &Folder{Root: root}
	for _, e := range ents {
		if isDir(root, e) {
			f.Classes = append(f.Classes, e.Name())
		}
	}
	if len(f.Classes) == 0 {
		return nil, fmt.Errorf("image folder %s: no class folders in it (one sub-folder per class, as torchvision's ImageFolder reads)", root)
	}
	sort.Strings(f.Classes)
	for label, class := range f.Classes {
		files, err := walkSorted(filepath.Join(root, class))
		if err != nil {
			return nil, fmt.Errorf("image folder %s: %w", root, err)
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("image folder %s: class %q has no image files (%s)", root, class, strings.Join(imageExts, ", "))
		}
		for _, p := range files {
			f.Paths = append(f.Paths, p)
			f.Labels = append(f.Labels, int32(label))
		}
	}
	return f, nil
}

// isDir follows a symbolic link, as torchvision does.
func isDir(root string, e fs.DirEntry) bool {
	if e.IsDir() {
		return true
	}
	if e.Type()&fs.ModeSymlink != 0 {
		st, err := os.Stat(filepath.Join(root, e.Name()))
		return err == nil && st.IsDir()
	}
	return false
}

// walkSorted is sorted(os.walk(dir, followlinks=True)) with each
// directory's image files in name order.
func walkSorted(dir string) ([]string, error) {
	type level struct {
		path  string
		files []string
	}
	var levels []level
	var walk func(string) error
	walk = func(d string) error {
		ents, err := os.ReadDir(d)
		if err != nil {
			return err
		}
		l := level{path: d}
		for _, e := range ents {
			switch {
			case isDir(d, e):
				if err := walk(filepath.Join(d, e.Name())); err != nil {
					return err
				}
			case isImage(e.Name()):
				l.files = append(l.files, e.Name())
			}
		}
		sort.Strings(l.files)
		levels = append(levels, l)
		return nil
	}
	if err := walk(dir); err != nil {
		return nil, err
	}
	sort.Slice(levels, func(i, j int) bool { return levels[i].path < levels[j].path })
	var out []string
	for _, l := range levels {
		for _, n := range l.files {
			out = append(out, filepath.Join(l.path, n))
		}
	}
	return out, nil
}
