package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestLine(t *testing.T) {
	for _, tc := range []struct {
		done, total int64
		rate        float64
		final       bool
		want        string
	}{
		{0, 1000, 0, false, "m    0.0% [>                   ] 0 B / 1000 B"},
		{512 << 20, 1 << 30, 64 << 20, false, "m   50.0% [==========>         ] 512.00 MiB / 1.00 GiB  64.00 MiB/s  ETA 0:08"},
		{1 << 30, 1 << 30, 64 << 20, true, "m  100.0% [====================] 1.00 GiB / 1.00 GiB  64.00 MiB/s  done"},
		{1536, -1, 100, false, "m  1.50 KiB  100 B/s"},
	} {
		if got := Line("m", tc.done, tc.total, tc.rate, tc.final); got != tc.want {
			t.Errorf("Line(%d, %d, %v) =\n%q\nwant\n%q", tc.done, tc.total, tc.rate, got, tc.want)
		}
	}
}

func TestDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0:00", 59 * time.Second: "0:59", 61 * time.Second: "1:01", 3725 * time.Second: "1:02:05", -time.Second: "0:00",
	} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestTerminalRedrawsInPlace(t *testing.T) {
	var buf bytes.Buffer
	b := NewMode(&buf, "x", true)
	now := time.Unix(0, 0)
	b.now = func() time.Time { return now }
	b.Update(5000, 10000, 1000)
	b.Update(6000, 10000, 1000) // within the interval: not drawn
	now = now.Add(time.Second)
	b.Update(10, 10000, 1000)
	b.Finish()
	out := buf.String()
	if strings.Count(out, "\r") != 3 || strings.Count(out, "\n") != 1 || !strings.HasSuffix(strings.TrimRight(out, " \n"), "done") {
		t.Fatalf("terminal output %q", out)
	}
	// The shorter third line must blank out the rest of the second.
	parts := strings.Split(out, "\r")
	if len(parts[2]) < len(parts[1]) {
		t.Errorf("redraw %q shorter than previous %q", parts[2], parts[1])
	}
}

func TestPlainLines(t *testing.T) {
	var buf bytes.Buffer
	b := NewMode(&buf, "x", false)
	now := time.Unix(0, 0)
	b.now = func() time.Time { return now }
	for i := int64(0); i < 100; i++ {
		b.Update(i*100, 10000, 1000)
		now = now.Add(100 * time.Millisecond)
	}
	b.Finish()
	out := buf.String()
	if strings.Contains(out, "\r") {
		t.Fatalf("plain output contains \\r: %q", out)
	}
	// 10s of updates at a 5s interval: t=0, t=5s, plus Finish.
	if n := strings.Count(out, "\n"); n != 3 {
		t.Fatalf("%d lines, want 3:\n%s", n, out)
	}
}

// A stalled transfer keeps showing the bytes it has, from 0 B at the start,
// and says for how long nothing arrived.
func TestStalledLine(t *testing.T) {
	var buf bytes.Buffer
	b := NewMode(&buf, "m.gguf", false)
	b.Interval = 0
	b.UpdateStalled(0, -1, 0, 0)
	b.UpdateStalled(0, -1, 0, 12*time.Second)
	b.UpdateStalled(4096, 8192, 100, 3*time.Second)
	b.UpdateStalled(4096, 8192, 100, time.Second)
	want := "m.gguf  0 B\n" +
		"m.gguf  0 B  stalled 12s\n" +
		"m.gguf   50.0% [==========>         ] 4.00 KiB / 8.00 KiB  100 B/s  stalled 3s\n" +
		"m.gguf   50.0% [==========>         ] 4.00 KiB / 8.00 KiB  100 B/s  ETA 0:41\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
}
