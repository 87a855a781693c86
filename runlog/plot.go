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

// Plot draws a run's curves into a PNG of width x height pixels (at 96
// dpi): loss (training per log step, test per evaluation), accuracy, and
// throughput, against the step, one above the other.
func Plot(recs []Record, path string, width, height int) error {
	var loss, acc, sps, testLoss, testAcc plotter.XYs
	title := "train"
	for _, r := range Latest(recs) {
		switch r.Type {
		case "start":
			title = fmt.Sprintf("%s, %d ranks x global batch %d", r.Model, r.WorldSize, r.Batch)
		case "step":
			if r.Loss != nil {
				loss = append(loss, plotter.XY{X: float64(r.Step), Y: *r.Loss})
			}
			if r.Accuracy != nil {
				acc = append(acc, plotter.XY{X: float64(r.Step), Y: 100 * *r.Accuracy})
			}
			if r.SamplesPerSecond != nil {
				sps = append(sps, plotter.XY{X: float64(r.Step), Y: *r.SamplesPerSecond})
			}
		case "epoch", "eval":
			if r.TestLoss != nil {
				testLoss = append(testLoss, plotter.XY{X: float64(r.Step), Y: *r.TestLoss})
			}
			if r.TestAccuracy != nil {
				testAcc = append(testAcc, plotter.XY{X: float64(r.Step), Y: 100 * *r.TestAccuracy})
			}
		}
	}
	if len(loss)+len(testLoss) == 0 {
		return fmt.Errorf("no step or epoch records to plot")
	}
	blue, red, green := color.RGBA{B: 200, A: 255}, color.RGBA{R: 200, A: 255}, color.RGBA{G: 140, A: 255}
	panel := func(ylabel string, series ...any) (*plot.Plot, error) {
		p := plot.New()
		p.Y.Label.Text = ylabel
		p.X.Label.Text = "step"
		p.Legend.Top = true
		for i := 0; i < len(series); i += 3 {
			xys := series[i].(plotter.XYs)
			if len(xys) == 0 {
				continue
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, err
			}
			l.Color = series[i+2].(color.Color)
			p.Add(l)
			p.Legend.Add(series[i+1].(string), l)
			if len(xys) < 50 {
				s, err := plotter.NewScatter(xys)
				if err != nil {
					return nil, err
				}
				s.Color = l.Color
				p.Add(s)
			}
		}
		return p, nil
	}
	p1, err := panel("loss", loss, "train", color.Color(blue), testLoss, "test", color.Color(red))
	if err != nil {
		return err
	}
	p1.Title.Text = title
	p2, err := panel("accuracy (%)", acc, "train", color.Color(blue), testAcc, "test", color.Color(red))
	if err != nil {
		return err
	}
	p3, err := panel("samples/s", sps, "all ranks", color.Color(green))
	if err != nil {
		return err
	}
	const dpi = 96
	img := vgimg.NewWith(vgimg.UseWH(vg.Length(width)*vg.Inch/dpi, vg.Length(height)*vg.Inch/dpi), vgimg.UseDPI(dpi))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 3, Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8), PadY: vg.Points(10)}
	plots := [][]*plot.Plot{{p1}, {p2}, {p3}}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	if !strings.EqualFold(filepath.Ext(path), ".png") {
		return fmt.Errorf("%s: only PNG is written", path)
	}
	return pngfile.Write(path, img)
}
