package runlog

import (
	"fmt"
	"image/color"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"train/internal/pngfile"
)

// Run is one run's log, for Compare.
type Run struct {
	Name string // the legend's label
	Recs []Record
}

// palette colours the runs of Compare in turn.
var palette = []color.Color{color.RGBA{B: 200, A: 255}, color.RGBA{R: 200, A: 255}, color.RGBA{G: 140, A: 255}, color.RGBA{R: 160, B: 160, A: 255}}

// Compare draws several runs on shared axes into a PNG: the test
// (validation) loss of every evaluation above, the training loss of every
// log step below, one colour per run, against the step (runs with the
// same global batch share their x axis). Records may come from another
// trainer that writes the same JSON lines (scripts/torch_gpt.py does).
func Compare(runs []Run, path string, width, height int) error {
	if !strings.EqualFold(filepath.Ext(path), ".png") {
		return fmt.Errorf("%s: only PNG is written", path)
	}
	top, bottom := plot.New(), plot.New()
	top.Title.Text = "validation loss"
	bottom.Title.Text = "training loss (mean since the last log line)"
	for _, p := range []*plot.Plot{top, bottom} {
		p.X.Label.Text, p.Y.Label.Text = "step", "loss"
		p.Legend.Top = true
		p.Add(plotter.NewGrid())
	}
	for i, r := range runs {
		var test, train plotter.XYs
		for _, rec := range Latest(r.Recs) {
			switch {
			case (rec.Type == "eval" || rec.Type == "epoch") && rec.TestLoss != nil:
				test = append(test, plotter.XY{X: float64(rec.Step), Y: *rec.TestLoss})
			case rec.Type == "step" && rec.Loss != nil:
				train = append(train, plotter.XY{X: float64(rec.Step), Y: *rec.Loss})
			}
		}
		if len(test)+len(train) == 0 {
			return fmt.Errorf("%s: no step or evaluation records", r.Name)
		}
		c := palette[i%len(palette)]
		for _, s := range []struct {
			p   *plot.Plot
			xys plotter.XYs
		}{{top, test}, {bottom, train}} {
			if len(s.xys) == 0 {
				continue
			}
			l, pts, err := plotter.NewLinePoints(s.xys)
			if err != nil {
				return err
			}
			l.Color, pts.Color = c, c
			pts.Radius = vg.Points(1.5)
			s.p.Add(l, pts)
			s.p.Legend.Add(r.Name, l)
		}
	}
	const dpi = 96
	img := vgimg.NewWith(vgimg.UseWH(vg.Length(width)*vg.Inch/dpi, vg.Length(height)*vg.Inch/dpi), vgimg.UseDPI(dpi))
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8), PadY: vg.Points(10)}
	plots := [][]*plot.Plot{{top}, {bottom}}
	canvases := plot.Align(plots, tiles, draw.New(img))
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	return pngfile.Write(path, img)
}
