package main

import (
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"strconv"
)

var (
	colFloor    = color.RGBA{0x1f, 0x5f, 0xd0, 0xff}
	colExecutor = color.RGBA{0xd0, 0x25, 0x25, 0xff}
	colAxis     = color.RGBA{0x20, 0x20, 0x20, 0xff}
	colGrid     = color.RGBA{0xe0, 0xe0, 0xe0, 0xff}
)

// writeChart draws completions over time, one line per mode, with the
// standard library only: axes, a grid, and the axis maxima in a 3×5 digit font.
func writeChart(path string, r *Report) error {
	const W, H, left, right, top, bottom = 900, 520, 70, 20, 30, 50
	img := image.NewRGBA(image.Rect(0, 0, W, H))
	draw.Draw(img, img.Bounds(), &image.Uniform{color.White}, image.Point{}, draw.Src)
	maxT := 1.0
	for _, m := range r.Modes {
		if n := len(m.Completions); n > 0 && m.Completions[n-1] > maxT {
			maxT = m.Completions[n-1]
		}
	}
	maxT = niceCeil(maxT)
	n := float64(r.Params.N)
	pw, ph := W-left-right, H-top-bottom
	x := func(t float64) int { return left + int(math.Round(t/maxT*float64(pw))) }
	y := func(c float64) int { return top + ph - int(math.Round(c/n*float64(ph))) }

	for i := 0; i <= 10; i++ {
		yy := y(n * float64(i) / 10)
		hline(img, left, left+pw, yy, colGrid)
	}
	step := niceStep(maxT / 10)
	for t := step; t <= maxT+1e-9; t += step {
		vline(img, x(t), top, top+ph, colGrid)
		drawNumber(img, x(t)-textWidth(fmtNum(t), 2)/2, top+ph+8, fmtNum(t), 2, colAxis)
	}
	hline(img, left, left+pw, top+ph, colAxis)
	vline(img, left, top, top+ph, colAxis)
	drawNumber(img, left-8-textWidth(strconv.Itoa(r.Params.N), 2), top-4, strconv.Itoa(r.Params.N), 2, colAxis)
	drawNumber(img, left-8-textWidth("0", 2), top+ph-4, "0", 2, colAxis)

	for _, m := range r.Modes {
		c := colExecutor
		if m.Mode == "floor" {
			c = colFloor
		}
		px, py := x(0), y(0)
		for i, t := range m.Completions {
			nx, ny := x(t), y(float64(i+1))
			line(img, px, py, nx, py, c) // a step: the count rises at t
			line(img, nx, py, nx, ny, c)
			px, py = nx, ny
		}
		// Legend swatch.
		lx := left + 20
		ly := top + 10
		if m.Mode == "executor" {
			ly += 14
		}
		for dy := 0; dy < 4; dy++ {
			hline(img, lx, lx+30, ly+dy, c)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func niceCeil(v float64) float64 {
	s := niceStep(v / 10)
	return math.Ceil(v/s) * s
}

func niceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func fmtNum(v float64) string {
	if v == math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

func hline(img *image.RGBA, x0, x1, y int, c color.Color) {
	for x := x0; x <= x1; x++ {
		img.Set(x, y, c)
	}
}

func vline(img *image.RGBA, x, y0, y1 int, c color.Color) {
	for y := y0; y <= y1; y++ {
		img.Set(x, y, c)
	}
}

// line draws a 2-pixel wide axis-parallel or diagonal segment (Bresenham).
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.Color) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := 1, 1
	if x0 > x1 {
		sx = -1
	}
	if y0 > y1 {
		sy = -1
	}
	e := dx + dy
	for {
		img.Set(x0, y0, c)
		img.Set(x0+1, y0, c)
		img.Set(x0, y0-1, c)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// digits is a 3×5 bitmap font for 0-9 and '.'.
var digits = map[rune][5]string{
	'0': {"111", "101", "101", "101", "111"},
	'1': {"010", "110", "010", "010", "111"},
	'2': {"111", "001", "111", "100", "111"},
	'3': {"111", "001", "111", "001", "111"},
	'4': {"101", "101", "111", "001", "001"},
	'5': {"111", "100", "111", "001", "111"},
	'6': {"111", "100", "111", "101", "111"},
	'7': {"111", "001", "010", "010", "010"},
	'8': {"111", "101", "111", "101", "111"},
	'9': {"111", "101", "111", "001", "111"},
	'.': {"000", "000", "000", "000", "010"},
}

func textWidth(s string, scale int) int { return len(s) * 4 * scale }

func drawNumber(img *image.RGBA, x, y int, s string, scale int, c color.Color) {
	for _, ch := range s {
		g, ok := digits[ch]
		if ok {
			for row := 0; row < 5; row++ {
				for col := 0; col < 3; col++ {
					if g[row][col] == '1' {
						for a := 0; a < scale; a++ {
							for b := 0; b < scale; b++ {
								img.Set(x+col*scale+a, y+row*scale+b, c)
							}
						}
					}
				}
			}
		}
		x += 4 * scale
	}
}
