package timeline

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"train/internal/pngfile"
)

// Plot draws one step of a trace (a merged one, or the ranks' files read
// and joined) as a PNG of width x height pixels: a row per rank, its
// training track's spans as boxes against time, so a pipeline's schedule
// can be seen without a browser. Forwards (F) are blue, backwards (B)
// green, the waits for a receive red, the other phases of the step grey;
// an arrow joins each send to its receive. step < 0 picks the last step
// but one that every rank finished (the last may be cut short).
func Plot(evs []Event, path string, step, width, height int) error {
	steps := map[int]map[int][2]float64{} // step -> rank -> the step's span
	for _, e := range evs {
		if e.Ph != "X" || e.Name != "step" || e.Tid != 0 {
			continue
		}
		n, ok := e.Args["step"].(float64)
		if !ok {
			continue
		}
		if steps[int(n)] == nil {
			steps[int(n)] = map[int][2]float64{}
		}
		steps[int(n)][e.Pid] = [2]float64{e.Ts, e.Ts + e.Dur}
	}
	ranks := map[int]bool{}
	for _, e := range evs {
		if e.Ph == "X" {
			ranks[e.Pid] = true
		}
	}
	if step < 0 {
		var full []int
		for n, r := range steps {
			if len(r) == len(ranks) {
				full = append(full, n)
			}
		}
		sort.Ints(full)
		if len(full) == 0 {
			return fmt.Errorf("no step that every rank finished: was the trace written with --timeline?")
		}
		step = full[max(len(full)-2, 0)]
	}
	byRank := steps[step]
	if len(byRank) == 0 {
		return fmt.Errorf("--step %d: not in the trace", step)
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range byRank {
		lo, hi = math.Min(lo, s[0]), math.Max(hi, s[1])
	}
	var rs []int
	for r := range ranks {
		rs = append(rs, r)
	}
	sort.Ints(rs)
	row := map[int]float64{}
	names := make([]string, len(rs))
	for i, r := range rs {
		row[r] = float64(len(rs) - 1 - i) // rank 0 on top
		names[len(rs)-1-i] = fmt.Sprintf("rank %d", r)
	}
	g := &gantt{lo: lo, hi: hi, rows: len(rs)}
	sent := map[int]Event{} // flow starts, by id (the ranks' files may come in any order)
	for _, e := range evs {
		if e.Ph == "s" {
			sent[e.ID] = e
		}
	}
	for _, e := range evs {
		if e.Ts+e.Dur < lo || e.Ts > hi {
			continue
		}
		switch {
		case e.Ph == "f":
			if s, ok := sent[e.ID]; ok {
				g.arrows = append(g.arrows, [4]float64{(s.Ts - lo) / 1e3, row[s.Pid], (e.Ts - lo) / 1e3, row[e.Pid]})
			}
		case e.Ph == "X" && e.Tid == 0:
			c, label, ok := style(e.Name)
			if ok {
				g.boxes = append(g.boxes, box{x0: (e.Ts - lo) / 1e3, x1: (e.Ts + e.Dur - lo) / 1e3, y: row[e.Pid], c: c, label: label})
			}
		}
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("train timeline, step %d: F forward, B backward (micro-batch number), red: waiting for a receive, grey: the step's other phases", step)
	p.Title.TextStyle.Font.Size = vg.Points(10)
	p.X.Label.Text = "ms from the step's start"
	p.Add(g)
	p.NominalY(names...)
	p.Y.Min, p.Y.Max = -0.6, float64(len(rs))-0.4
	img := vgimg.New(vg.Length(width)*vg.Inch/96, vg.Length(height)*vg.Inch/96)
	p.Draw(draw.New(img))
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	return pngfile.Write(path, img)
}

var (
	blue  = color.RGBA{R: 70, G: 120, B: 210, A: 255}
	green = color.RGBA{R: 60, G: 160, B: 80, A: 255}
	red   = color.RGBA{R: 220, G: 70, B: 60, A: 255}
	grey  = color.RGBA{R: 170, G: 170, B: 170, A: 255}
	black = color.RGBA{A: 255}
)

// style is how a training-track span is drawn: its colour, its label and
// whether it is drawn at all (the step and the phases holding a
// pipeline's operations are containers, not boxes).
func style(name string) (color.Color, string, bool) {
	switch {
	case strings.HasPrefix(name, "F") && isNum(name[1:]):
		return blue, name, true
	case strings.HasPrefix(name, "B") && isNum(name[1:]):
		return green, name, true
	case strings.HasPrefix(name, "recv "):
		return red, "", true
	case strings.HasPrefix(name, "send "):
		return black, "", true
	case name == "data" || name == "optimizer" || name == "allreduce_wait" || name == "evaluate" || name == "checkpoint":
		return grey, "", true
	}
	return nil, "", false
}

func isNum(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

type box struct {
	x0, x1, y float64
	c         color.Color
	label     string
}

// gantt is the plotter: boxes on rows, arrows between them, in data
// coordinates (ms, row).
type gantt struct {
	lo, hi float64
	rows   int
	boxes  []box
	arrows [][4]float64
}

func (g *gantt) DataRange() (xmin, xmax, ymin, ymax float64) {
	return 0, (g.hi - g.lo) / 1e3, -0.5, float64(g.rows) - 0.5
}

func (g *gantt) Plot(c draw.Canvas, p *plot.Plot) {
	tx, ty := p.Transforms(&c)
	lab := draw.TextStyle{Color: color.White, Font: font.From(p.X.Tick.Label.Font, vg.Points(8)),
		XAlign: draw.XCenter, YAlign: draw.YCenter, Handler: p.X.Tick.Label.Handler}
	for _, b := range g.boxes {
		x0, x1 := tx(b.x0), tx(b.x1)
		if x1-x0 < 0.6 {
			x1 = x0 + 0.6 // a send is a few microseconds: keep it visible
		}
		y0, y1 := ty(b.y-0.3), ty(b.y+0.3)
		c.FillPolygon(b.c, []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}})
		if b.label != "" && x1-x0 > lab.Width(b.label)+2 {
			c.FillText(lab, vg.Point{X: (x0 + x1) / 2, Y: (y0 + y1) / 2}, b.label)
		}
	}
	ln := draw.LineStyle{Color: color.RGBA{A: 160}, Width: vg.Points(0.6)}
	for _, a := range g.arrows {
		x0, y0, x1, y1 := tx(a[0]), ty(a[1]), tx(a[2]), ty(a[3])
		if a[3] < a[1] {
			y0, y1 = ty(a[1]-0.3), ty(a[3]+0.3)
		} else {
			y0, y1 = ty(a[1]+0.3), ty(a[3]-0.3)
		}
		c.StrokeLine2(ln, x0, y0, x1, y1)
		c.FillPolygon(ln.Color, []vg.Point{{X: x1, Y: y1}, {X: x1 - 2, Y: y1 + sign(y0-y1)*4}, {X: x1 + 2, Y: y1 + sign(y0-y1)*4}})
	}
}

func sign(v vg.Length) vg.Length {
	if v < 0 {
		return -1
	}
	return 1
}
