package main

import (
	"bytes"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"loam.dev/router/driver"
)

// randomPause is a cutover's pause as the driver records it, with random command times:
// each stage's commands start a little after the stage, some fail, and an unreachable
// instance's pause can outlast its stage (it fails while the fence runs).
func randomPause(t *testing.T, r *rand.Rand) driver.PauseReport {
	t0 := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	at := func(us int) time.Time { return t0.Add(time.Duration(us) * time.Microsecond) }
	var spans []driver.Span
	now := 0
	for _, stage := range []string{"pause", "fence", "cutover", "publish", "files", "reload", "resume"} {
		n := 1 + r.IntN(4)
		end := now
		for i := range n {
			start := now + r.IntN(300)
			if i == 0 {
				start = now
			}
			d := r.IntN(40_000)
			res := "ok"
			if stage != "resume" && r.IntN(5) == 0 {
				res = "unreachable"
			}
			target := "ref-" + strconv.Itoa(i+1)
			if stage == "pause" && i == n-1 && r.IntN(2) == 0 {
				d += 100_000 // outlasts its stage
				res = "unreachable"
				target = "late"
			} else {
				end = max(end, start+d)
			}
			spans = append(spans, driver.Span{Kind: driver.SpanExec, Step: "app/2/" + stage + "/" + target, Target: target, Result: res, Start: at(start), End: at(start + d)})
		}
		spans = append(spans, driver.Span{Kind: driver.SpanSave, Start: at(end), End: at(end + r.IntN(3000))})
		now = end + 3000 + r.IntN(5000)
	}
	rep, ok := driver.CutoverPause(spans)
	require.True(t, ok)
	return rep
}

// parseMS reads "12.3ms".
func parseMS(t *testing.T, s string) time.Duration {
	f, err := strconv.ParseFloat(strings.TrimSuffix(s, "ms"), 64)
	require.NoError(t, err, s)
	return time.Duration(f * float64(time.Millisecond))
}

// barCols are the columns of a drawn bar that hold one of the given runes.
func barCols(bar string, marks string) map[int]bool {
	out := map[int]bool{}
	for i, r := range []rune(bar) {
		if strings.ContainsRune(marks, r) {
			out[i] = true
		}
	}
	return out
}

var (
	windowLine = regexp.MustCompile(`^ pause window ([0-9.]+ms): commands ([0-9.]+ms), controller ([0-9.]+ms)`)
	stepLine   = regexp.MustCompile(`^   (\S+)\s*│(.*)│ @([0-9.]+ms) ([0-9.]+ms): commands ([0-9.]+ms), gaps ([0-9.]+ms)`)
	cmdLine    = regexp.MustCompile(`^     (\S+)\s*│(.*)│ @([0-9.]+ms) ([0-9.]+ms)`)
)

// TestPrintPauseDrawsTheWindow: over random pauses, the text timeline `cutover status`
// prints says what the report holds: the steps' wall times add up to the window, each
// step's bar covers the bars of its commands and is solid (█) exactly where one of them
// runs, each command's bar starts at the column of its offset, and each command's wall
// time is the one measured.
func TestPrintPauseDrawsTheWindow(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 21))
		rep := randomPause(t, r)
		var out bytes.Buffer
		printPause(&out, rep, pauseWidth)
		lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
		m := windowLine.FindStringSubmatch(lines[0])
		require.NotNil(t, m, lines[0])
		window := parseMS(t, m[1])
		require.InDelta(t, rep.Window, window, float64(100*time.Microsecond))
		require.InDelta(t, window, parseMS(t, m[2])+parseMS(t, m[3]), float64(200*time.Microsecond), "commands + controller = window")
		var sum time.Duration
		var steps int
		var stepBar, stepSolid map[int]bool
		var cmds []map[int]bool
		check := func() {
			if stepBar == nil {
				return
			}
			union := map[int]bool{}
			for _, c := range cmds {
				for col := range c {
					require.True(t, stepBar[col], "seed %d: a command's bar outside its step's (column %d)\n%s", seed, col, out.String())
					union[col] = true
				}
			}
			require.Equal(t, union, stepSolid, "seed %d: the step is solid exactly where its commands run\n%s", seed, out.String())
		}
		sc := pauseScale{rep.Window, pauseWidth}
		for _, l := range lines[2:] { // (randomPause is a Timeline's: no from-the-audit-log line)
			if m := stepLine.FindStringSubmatch(l); m != nil {
				check()
				st := rep.Steps[steps]
				require.Equal(t, st.Stage, m[1])
				steps++
				wall := parseMS(t, m[4])
				sum += wall
				require.InDelta(t, wall, parseMS(t, m[5])+parseMS(t, m[6]), float64(200*time.Microsecond), "commands + gaps = the step's wall")
				stepBar, stepSolid, cmds = barCols(m[2], "█░"), barCols(m[2], "█"), nil
				continue
			}
			m := cmdLine.FindStringSubmatch(l)
			require.NotNil(t, m, "seed %d: %q", seed, l)
			cols := barCols(m[2], "█")
			require.NotEmpty(t, cols)
			off, wall := parseMS(t, m[3]), parseMS(t, m[4])
			lo, hi := sc.cols(off, off+wall)
			first := pauseWidth
			for c := range cols {
				first = min(first, c)
			}
			require.InDelta(t, lo, first, 1, "seed %d: the bar of %q starts at its offset's column", seed, l)
			require.InDelta(t, hi-lo, len(cols), 2, "seed %d: the bar of %q is as long as its wall time", seed, l)
			cmds = append(cmds, cols)
		}
		check()
		require.Equal(t, len(rep.Steps), steps)
		require.InDelta(t, window, sum, float64(time.Duration(steps)*100*time.Microsecond), "seed %d: the steps' walls add up to the window\n%s", seed, out.String())
	}
}

var svgRect = regexp.MustCompile(`<rect class="(tile|step|cmd)" data-stage="([^"]+)" x="([0-9.]+)" y="[0-9]+" width="([0-9.]+)"`)

// TestPauseSVGDrawsTheWindow: in the HTML report the tiles of the window's bar are the
// steps, side by side, as wide together as the window; each command's bar lies inside its
// step's band.
func TestPauseSVGDrawsTheWindow(t *testing.T) {
	for seed := range uint64(100) {
		rep := randomPause(t, rand.New(rand.NewPCG(seed, 7)))
		var page bytes.Buffer
		require.NoError(t, renderPage(&page, "cutover", []reportSection{{Pause: &rep}}))
		type box struct{ x, w float64 }
		var tiles []box
		bands := map[string]box{}
		var stages []string
		ncmd := 0
		for _, m := range svgRect.FindAllStringSubmatch(page.String(), -1) {
			x, _ := strconv.ParseFloat(m[3], 64)
			w, _ := strconv.ParseFloat(m[4], 64)
			switch m[1] {
			case "tile":
				tiles = append(tiles, box{x, w})
				stages = append(stages, m[2])
			case "step":
				bands[m[2]] = box{x, w}
			case "cmd":
				ncmd++
				b, ok := bands[m[2]]
				require.True(t, ok, "a command drawn before its step")
				require.GreaterOrEqual(t, x, b.x-0.002, "seed %d %s: starts inside its step's band", seed, m[2])
				require.LessOrEqual(t, x+w, b.x+b.w+0.002, "seed %d %s: ends inside its step's band", seed, m[2])
			}
		}
		require.Len(t, tiles, len(rep.Steps))
		total := 0.0
		for i, tl := range tiles {
			require.Equal(t, rep.Steps[i].Stage, stages[i])
			if i > 0 {
				require.InDelta(t, tiles[i-1].x+tiles[i-1].w, tl.x, 0.002, "seed %d: tiles side by side", seed)
			}
			total += tl.w
		}
		require.InDelta(t, float64(pauseLeftW), tiles[0].x, 0.002)
		require.InDelta(t, float64(pauseBarW), total, 0.01, "seed %d: the steps' tiles are the window", seed)
		n := 0
		for _, st := range rep.Steps {
			n += len(st.Commands)
		}
		require.Equal(t, n, ncmd, "every command drawn")
	}
}
