// Package progress renders transfer progress (bytes, percent, rate, ETA)
// for a terminal: redrawn in place on one line when the output is a
// terminal, plain lines at a fixed interval otherwise (logs, CI).
//
// Typical use with storage/download:
//
//	bar := progress.New(os.Stderr, "model.gguf")
//	opt.Progress = func(p download.Progress) { bar.UpdateStalled(p.Done, p.Total, p.Rate, p.Stalled) }
//	res, err := download.Fetch(ctx, fsys, url, dst, opt)
//	bar.Finish()
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Bar renders one transfer. It is safe for concurrent use.
type Bar struct {
	w     io.Writer
	label string
	tty   bool
	// Interval between redraws: 100ms on a terminal, 5s for plain lines.
	Interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	last    time.Time
	drawn   bool
	lastLen int
	done    int64
	total   int64
	rate    float64
	stalled time.Duration
}

// New returns a Bar writing to w, redrawing in place when w is a terminal.
func New(w io.Writer, label string) *Bar {
	return NewMode(w, label, IsTerminal(w))
}

// NewMode is New with the terminal decision made by the caller.
func NewMode(w io.Writer, label string, tty bool) *Bar {
	b := &Bar{w: w, label: label, tty: tty, now: time.Now, total: -1}
	b.Interval = 5 * time.Second
	if tty {
		b.Interval = 100 * time.Millisecond
	}
	return b
}

// IsTerminal reports whether w is a character device; good enough to
// decide between \r redraws and plain lines. The package reads no
// environment: a caller that honours TERM=dumb checks it itself and
// passes its decision to NewMode.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Update records progress (total < 0 when unknown, rate in bytes per
// second) and redraws if the interval has passed.
func (b *Bar) Update(done, total int64, rate float64) {
	b.UpdateStalled(done, total, rate, 0)
}

// StallShown is how long a transfer must have received nothing before the
// line says so.
const StallShown = 2 * time.Second

// UpdateStalled is Update for a transfer that has received nothing for
// stalled: from StallShown on, the line says "stalled 12s" instead of an
// ETA, and the bytes received so far stay on it (from "0 B" at the start).
func (b *Bar) UpdateStalled(done, total int64, rate float64, stalled time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done, b.total, b.rate, b.stalled = done, total, rate, stalled
	now := b.now()
	if b.drawn && now.Sub(b.last) < b.Interval {
		return
	}
	b.last, b.drawn = now, true
	b.draw(false)
}

// Finish draws the final state and ends the line.
func (b *Bar) Finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.draw(true)
	if b.tty {
		io.WriteString(b.w, "\n")
	}
}

// Stop ends the line of a transfer that failed, leaving its last state
// (without "done") so the error printed next starts on a line of its own.
func (b *Bar) Stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tty && b.drawn {
		io.WriteString(b.w, "\n")
	}
}

func (b *Bar) draw(final bool) {
	line := line(b.label, b.done, b.total, b.rate, b.stalled, final)
	if !b.tty {
		io.WriteString(b.w, line+"\n")
		return
	}
	pad := ""
	if n := b.lastLen - len(line); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	b.lastLen = len(line)
	io.WriteString(b.w, "\r"+line+pad)
}

const barWidth = 20

// Line formats one progress line, e.g.
// "model.gguf  45.3% [=========>          ] 1.23 GiB / 2.71 GiB  35.2 MiB/s  ETA 0:42".
func Line(label string, done, total int64, rate float64, final bool) string {
	return line(label, done, total, rate, 0, final)
}

func line(label string, done, total int64, rate float64, stalled time.Duration, final bool) string {
	var sb strings.Builder
	if label != "" {
		sb.WriteString(label)
		sb.WriteString("  ")
	}
	if total > 0 {
		frac := min(max(float64(done)/float64(total), 0), 1)
		fmt.Fprintf(&sb, "%5.1f%% [", 100*frac)
		full := int(frac * barWidth)
		sb.WriteString(strings.Repeat("=", full))
		if full < barWidth {
			sb.WriteString(">")
			sb.WriteString(strings.Repeat(" ", barWidth-full-1))
		}
		fmt.Fprintf(&sb, "] %s / %s", Bytes(done), Bytes(total))
	} else {
		sb.WriteString(Bytes(done))
	}
	if rate > 0 {
		fmt.Fprintf(&sb, "  %s/s", Bytes(int64(rate)))
	}
	switch {
	case final:
		sb.WriteString("  done")
	case stalled >= StallShown:
		sb.WriteString("  stalled ")
		sb.WriteString(stalled.Round(time.Second).String())
	case total > 0 && rate > 0 && done < total:
		sb.WriteString("  ETA ")
		sb.WriteString(Duration(time.Duration(float64(total-done) / rate * float64(time.Second))))
	}
	return sb.String()
}

// Bytes formats n with binary units: "512 B", "1.50 KiB", "2.71 GiB".
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		v /= unit
		if v < unit || u == "TiB" {
			return fmt.Sprintf("%.2f %s", v, u)
		}
	}
	panic("unreachable")
}

// Duration formats an ETA as m:ss or h:mm:ss.
func Duration(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	if s < 0 {
		s = 0
	}
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}
