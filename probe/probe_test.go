package probe

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

const ms = time.Millisecond

func newTestTable(t *testing.T) *Table {
	tb := NewTable("v1", "GPU A", "")
	return tb
}

// feed records n samples of each arm, device first.
func feed(c *Class, n int, dev, host time.Duration) {
	for range n {
		c.Record(true, dev, false)
		c.Record(false, host, false)
	}
}

func TestAlternates(t *testing.T) {
	c := newTestTable(t).Class("ffn")
	want := []Arm{Device, HostTimed, Device, HostTimed}
	for i, w := range want {
		if got := c.Arm(); got != w {
			t.Fatalf("call %d: %s, want %s", i, got, w)
		}
	}
}

func TestColdAndWarmupDiscarded(t *testing.T) {
	c := newTestTable(t).Class("ffn")
	// A catastrophic cold sample and a slow warm-up sample, then a device
	// 1.5x faster than the host (a close race: full sample count).
	c.Record(true, 1000*time.Second, true)
	c.Record(true, 500*ms, false) // warm-up: discarded
	for i := range 5 {
		c.Record(true, 2*ms, false)
		c.Record(false, 3*ms, false)
		if c.Verdict() != Undecided {
			t.Fatalf("decided after %d close samples", i+1)
		}
	}
	c.Record(true, 2*ms, false)
	c.Record(false, 3*ms, false)
	if v := c.Verdict(); v != DeviceWins {
		t.Fatalf("verdict %s, want device (cold/warm-up samples must not count)", v)
	}
	if c.Arm() != Device {
		t.Fatal("decided class does not route to the device")
	}
}

func TestBestSampleDecides(t *testing.T) {
	c := newTestTable(t).Class("matmat")
	c.Record(true, 0, false) // warm-up
	// The host's mean is poisoned by one page-fault sample; its best is
	// still 1.2x faster than the device's.
	for i := range 6 {
		c.Record(true, 12*ms, false)
		h := 10 * ms
		if i == 0 {
			h = 300 * ms
		}
		c.Record(false, h, false)
	}
	if v := c.Verdict(); v != HostWins {
		t.Fatalf("verdict %s, want host", v)
	}
}

func TestEarlyVerdict(t *testing.T) {
	c := newTestTable(t).Class("lm_head")
	c.Record(true, 0, false) // warm-up
	feed(c, 1, 1*ms, 5*ms)
	if c.Verdict() != Undecided {
		t.Fatal("decided on one sample per arm")
	}
	feed(c, 1, 1*ms, 5*ms)
	if v := c.Verdict(); v != DeviceWins {
		t.Fatalf("5x gap after 2 samples: %s, want an early device verdict", v)
	}
}

func TestSlowDeviceLoses(t *testing.T) {
	c := newTestTable(t).Class("ffn")
	c.Record(true, 0, false)
	feed(c, 2, 9*ms, 3*ms)
	if v := c.Verdict(); v != HostWins {
		t.Fatalf("verdict %s, want host", v)
	}
	if c.Arm() != Host {
		t.Fatal("lost class still routes to the device")
	}
	// Later samples cannot reopen a decided class.
	feed(c, 10, 1*ms, 100*ms)
	if c.Verdict() != HostWins {
		t.Fatal("verdict changed after deciding")
	}
}

func TestDeclineLimit(t *testing.T) {
	c := newTestTable(t).Class("qkv")
	for i := range DefaultConfig.DeclineLimit - 1 {
		c.Decline()
		if c.Verdict() != Undecided {
			t.Fatalf("settled after %d declines", i+1)
		}
	}
	c.Decline()
	if c.Verdict() != HostWins {
		t.Fatal("a device that always declines never settles on the host")
	}
}

func TestRunFakeArms(t *testing.T) {
	tb := newTestTable(t)
	var clock time.Time
	tb.Now = func() time.Time { return clock }
	c := tb.Class("ffn")
	devCalls, hostCalls := 0, 0
	dev := func(ctx context.Context) (bool, error) {
		if HostOnly(ctx) {
			t.Fatal("device arm inside a host scope")
		}
		devCalls++
		clock = clock.Add(8 * ms)
		return devCalls == 1, nil // the first call uploads weights
	}
	host := func(ctx context.Context) error {
		if !HostOnly(ctx) {
			t.Fatal("host arm outside a host scope")
		}
		hostCalls++
		clock = clock.Add(2 * ms)
		return nil
	}
	for range 20 {
		if err := c.Run(context.Background(), dev, host); err != nil {
			t.Fatal(err)
		}
	}
	if c.Verdict() != HostWins {
		t.Fatalf("verdict %s, want host (device 4x slower)", c.Verdict())
	}
	// Cold first call, warm-up, then 2 clean device samples: 4 device calls.
	if devCalls != 4 {
		t.Errorf("device ran %d times, want 4", devCalls)
	}
	// Inside a host scope nothing reaches the device.
	before := devCalls
	c2 := tb.Class("other")
	c2.Run(HostScope(context.Background()), dev, host)
	if devCalls != before {
		t.Error("host scope reached the device")
	}
	// A declining device falls through to the host and counts.
	c3 := tb.Class("declines")
	for range 2 * DefaultConfig.DeclineLimit {
		c3.Run(context.Background(), func(context.Context) (bool, error) { return false, ErrDecline }, host)
	}
	if c3.Verdict() != HostWins {
		t.Error("declining device not settled on the host")
	}
}

func TestPause(t *testing.T) {
	tb := newTestTable(t)
	c := tb.Class("ffn")
	c.Record(true, 0, false)
	feed(c, 2, 1*ms, 10*ms)
	if c.Arm() != Device {
		t.Fatal("device should win")
	}
	r1 := tb.Pause()
	r2 := tb.Pause()
	if c.Arm() != Host {
		t.Fatal("paused table routes to the device")
	}
	r1()
	r1() // idempotent: must not lift the other holder's pause
	if !tb.Paused() || c.Arm() != Host {
		t.Fatal("pause lifted while a holder remains")
	}
	r2()
	if tb.Paused() || c.Arm() != Device {
		t.Fatal("pause not lifted after the last holder")
	}
}

func TestCacheAdoption(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "probe.json")
	// Decide two classes in one "process".
	a := NewTable("v1", "GPU A", path)
	c := a.Class("ffn")
	c.Record(true, 0, false)
	feed(c, 2, 1*ms, 10*ms)
	d := a.Class("matmat")
	d.Record(true, 0, false)
	feed(d, 2, 10*ms, 1*ms)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("verdict not persisted: %v", err)
	}
	// A new process on the same device and version adopts both.
	b := NewTable("v1", "GPU A", path)
	if b.Class("ffn").Verdict() != DeviceWins || b.Class("matmat").Verdict() != HostWins {
		t.Fatal("remembered verdicts not adopted")
	}
	// Another device's verdict is not mine, whatever it claims.
	other := NewTable("v1", "GPU B", path)
	if other.Class("ffn").Verdict() != Undecided {
		t.Fatal("another device's verdict adopted")
	}
	// Neither is one from another build of the engine.
	older := NewTable("v0", "GPU A", path)
	if older.Class("ffn").Verdict() != Undecided {
		t.Fatal("another version's verdict adopted")
	}
	// GPU B's verdict joins the file without dropping GPU A's.
	e := other.Class("ffn")
	e.Record(true, 0, false)
	feed(e, 2, 10*ms, 1*ms)
	data, _ := os.ReadFile(path)
	entries, err := ParseCache(data)
	if err != nil || len(entries) != 3 {
		t.Fatalf("cache after two devices: %d entries, %v\n%s", len(entries), err, data)
	}
	// A corrupt file means probing again, not an error.
	os.WriteFile(path, []byte("{not json"), 0o644)
	if NewTable("v1", "GPU A", path).Class("ffn").Verdict() != Undecided {
		t.Fatal("corrupt cache adopted")
	}
}

func FuzzParseCache(f *testing.F) {
	f.Add([]byte(`{"entries":[{"version":"v1","device":"GPU A","class":"ffn","winner":"device"}]}`))
	f.Add([]byte(`{"entries":[{"winner":"maybe"}]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := ParseCache(data)
		if err != nil {
			return
		}
		tb := NewTable("v1", "GPU A", "")
		tb.Adopt(entries)
		for _, e := range entries {
			if e.Winner != "device" && e.Winner != "host" {
				t.Fatalf("accepted winner %q", e.Winner)
			}
		}
	})
}
