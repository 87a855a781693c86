// Package pngfile writes a gonum/plot image canvas as a PNG file: the one
// way train's plots (train plot, train timeline plot) end.
package pngfile

import (
	"os"

	"gonum.org/v1/plot/vg/vgimg"
)

// Write encodes img as PNG into path.
func Write(path string, img *vgimg.Canvas) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
