package bench

import (
	"fmt"
	"image/color"
	"math"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// bar is one bar of a chart panel.
type bar struct {
	label string
	value float64
}

// renderChart writes a PNG to path with three panels side by side: cost
// per million tasks by path, tasks per second by consumer (median of the
// interleaved runs), and cost per million workflows next to Step Functions
// and durable functions. An empty panel is drawn with a note instead of
// bars.
func renderChart(path string, cost, rate, workflows []bar) error {
	const w, h = 20 * vg.Inch, 5 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 3, PadX: vg.Inch / 3, PadY: vg.Inch / 6, PadTop: vg.Inch / 6, PadBottom: vg.Inch / 6, PadLeft: vg.Inch / 6, PadRight: vg.Inch / 6}
	panels := []struct {
		title, unit string
		bars        []bar
		col         color.Color
	}{
		{"Cost per million tasks (USD, us-east-1 list prices)", "USD", cost, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}},
		{"Throughput on the local stack (tasks/s, median)", "tasks/s", rate, color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}},
		{"Cost per million workflows (USD): leasehold, Step Functions, durable", "USD", workflows, color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}},
	}
	for i, p := range panels {
		pl := plot.New()
		pl.Title.Text = p.title
		pl.Y.Label.Text = p.unit
		pl.Y.Min = 0
		if len(p.bars) == 0 {
			pl.X.Label.Text = "not measured in this run"
			pl.Draw(tiles.At(dc, i, 0))
			continue
		}
		values := make(plotter.Values, len(p.bars))
		names := make([]string, len(p.bars))
		for j, b := range p.bars {
			values[j] = b.value
			names[j] = b.label
		}
		bars, err := plotter.NewBarChart(values, vg.Points(28))
		if err != nil {
			return fmt.Errorf("chart %q: %w", p.title, err)
		}
		bars.Color = p.col
		bars.LineStyle.Width = 0
		pl.Add(bars)
		pl.NominalX(names...)
		if len(names) > 6 {
			pl.X.Tick.Label.Rotation = math.Pi / 5
			pl.X.Tick.Label.XAlign = draw.XRight
			pl.X.Tick.Label.YAlign = draw.YCenter
		}
		labels, err := plotter.NewLabels(plotter.XYLabels{XYs: xys(values), Labels: valueLabels(values)})
		if err != nil {
			return fmt.Errorf("chart %q: %w", p.title, err)
		}
		pl.Add(labels)
		pl.Draw(tiles.At(dc, i, 0))
	}
	return savePNG(img, path)
}

func xys(v plotter.Values) plotter.XYs {
	out := make(plotter.XYs, len(v))
	for i, y := range v {
		out[i] = plotter.XY{X: float64(i) - 0.2, Y: y}
	}
	return out
}

func valueLabels(v plotter.Values) []string {
	out := make([]string, len(v))
	for i, y := range v {
		if y >= 10 {
			out[i] = fmt.Sprintf("%.0f", y)
		} else {
			out[i] = fmt.Sprintf("%.2f", y)
		}
	}
	return out
}

func savePNG(img *vgimg.Canvas, path string) error {
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
