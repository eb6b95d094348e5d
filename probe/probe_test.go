package probe

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
	f.Add([]byte(`{"entries":[{"version":"v1","device":"a + b + cpu","class":"decode","winner":"b","arms":["a","b","cpu"]}]}`))
	f.Add([]byte(`{"entries":[{"winner":"c","arms":["a","b"]}]}`))
	f.Add([]byte(`{"entries":[{"winner":"a","arms":["a","a"]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := ParseCache(data)
		if err != nil {
			return
		}
		tb := NewTable("v1", "GPU A", "")
		tb.Adopt(entries)
		for _, e := range entries {
			if e.Arms == nil || !slices.Contains(e.Arms, e.Winner) {
				t.Fatalf("accepted winner %q of arms %q", e.Winner, e.Arms)
			}
			if len(e.Arms) == 2 && e.Arms[0] == ArmDevice && e.Arms[1] == ArmHost && e.Winner != "device" && e.Winner != "host" {
				t.Fatalf("accepted winner %q", e.Winner)
			}
		}
	})
}

// feed3 records n samples of each of three arms, in order.
func feed3(c *Class, n int, d ...time.Duration) {
	for range n {
		for i, x := range d {
			c.RecordArm(i, x, false)
		}
	}
}

func warm3(c *Class) {
	c.RecordArm(0, 0, false)
	c.RecordArm(1, 0, false)
}

func TestRaceTakesTurns(t *testing.T) {
	c := newTestTable(t).Race("decode", "cuda", "webgpu", "cpu")
	for i, w := range []int{0, 1, 2, 0, 1, 2, 0} {
		if got, timed := c.Next(); got != w || !timed {
			t.Fatalf("call %d: arm %d (timed %v), want %d timed", i, got, timed, w)
		}
	}
}

func TestRaceWarmupPerDeviceArm(t *testing.T) {
	c := newTestTable(t).Race("decode", "cuda", "webgpu", "cpu")
	// Each device arm's first sample is a warm-up, whatever its order; the
	// host's is not. A cold sample never counts.
	c.RecordArm(0, 1000*ms, false)
	c.RecordArm(1, 1000*ms, false)
	c.RecordArm(2, 1000*time.Second, true)
	feed3(c, 2, 1*ms, 5*ms, 9*ms)
	if c.Winner() != 0 || c.Verdict() != DeviceWins {
		t.Fatalf("winner %d, want arm 0 (the warm-ups must not count)", c.Winner())
	}
	if d, n := c.Best(0); d != 1*ms || n != 2 {
		t.Errorf("arm 0 best %v of %d samples, want 1ms of 2", d, n)
	}
	if i, timed := c.Next(); i != 0 || timed {
		t.Errorf("decided race runs arm %d (timed %v), want 0 untimed", i, timed)
	}
}

func TestRaceEarlyVerdictNeedsGapOverEveryArm(t *testing.T) {
	c := newTestTable(t).Race("prefill", "cuda", "webgpu", "cpu")
	warm3(c)
	// cuda is 4x faster than the CPU but only 1.5x faster than webgpu: no
	// early verdict; the full sample count decides.
	for i := range 5 {
		feed3(c, 1, 2*ms, 3*ms, 8*ms)
		if c.Winner() != -1 {
			t.Fatalf("decided after %d samples of a close race", i+1)
		}
	}
	feed3(c, 1, 2*ms, 3*ms, 8*ms)
	if c.Winner() != 0 {
		t.Fatalf("winner %d after the full count, want 0", c.Winner())
	}
	// A clear gap over both others decides at 2 samples, for any arm.
	h := newTestTable(t).Race("decode", "cuda", "webgpu", "cpu")
	warm3(h)
	feed3(h, 2, 5*ms, 7*ms, 1*ms)
	if h.Winner() != 2 || h.Verdict() != HostWins {
		t.Fatalf("winner %d, want the host (5x faster than either device)", h.Winner())
	}
}

func TestRaceTieGoesToEarlierArm(t *testing.T) {
	c := newTestTable(t).Race("decode", "cuda", "webgpu", "cpu")
	warm3(c)
	feed3(c, 6, 3*ms, 3*ms, 3*ms)
	if c.Winner() != 0 {
		t.Fatalf("winner %d of a tie, want the first arm", c.Winner())
	}
}

func TestRaceDeclinesAndFailures(t *testing.T) {
	tb := newTestTable(t)
	c := tb.Race("moe", "cuda", "webgpu", "cpu")
	for range DefaultConfig.DeclineLimit {
		c.DeclineArm(0)
	}
	if c.Winner() != -1 {
		t.Fatal("one arm out of three settled the race")
	}
	for range 5 {
		if i, _ := c.Next(); i == 0 {
			t.Fatal("an arm out of the race still takes turns")
		}
	}
	// The remaining two decide among themselves; arm 0's samples are ignored.
	c.RecordArm(1, 0, false)
	c.RecordArm(0, 1*ns, false)
	feed3(c, 2, 1*ns, 1*ms, 9*ms)
	if c.Winner() != 1 {
		t.Fatalf("winner %d, want webgpu", c.Winner())
	}
	// The host never declines and is never out.
	d := tb.Race("lm_head", "cuda", "webgpu", "cpu")
	for range 2 * DefaultConfig.DeclineLimit {
		d.DeclineArm(2)
		d.Fail(2)
	}
	if d.Winner() != -1 {
		t.Fatal("the host declined out of the race")
	}
	// Both devices out: the host wins.
	for range DefaultConfig.DeclineLimit {
		d.DeclineArm(0)
		d.DeclineArm(1)
	}
	if d.Winner() != 2 {
		t.Fatalf("winner %d with both devices out, want the host", d.Winner())
	}
}

const ns = time.Nanosecond

func TestRaceStep(t *testing.T) {
	tb := newTestTable(t)
	var clock time.Time
	tb.Now = func() time.Time { return clock }
	c := tb.Race("decode", "fast", "broken", "slow", "cpu")
	cost := []time.Duration{1 * ms, 0, 3 * ms, 6 * ms}
	calls := make([]int, 4)
	errBroken := errors.New("lost device")
	run := func(ctx context.Context, arm int) (bool, error) {
		if HostOnly(ctx) != (arm == 3) {
			t.Fatalf("arm %d in host scope %v", arm, HostOnly(ctx))
		}
		calls[arm]++
		clock = clock.Add(cost[arm])
		if arm == 1 {
			return false, errBroken
		}
		return calls[arm] == 1 && arm == 0, nil // fast's first call uploads
	}
	for range 40 {
		arm, err := c.Step(context.Background(), run)
		if errors.Is(err, errBroken) {
			c.Fail(arm)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if c.Winner() != 0 {
		t.Fatalf("winner %d, want arm 0", c.Winner())
	}
	if calls[1] != 1 {
		t.Errorf("the failed arm ran %d times, want 1", calls[1])
	}
	// A failure's verdict is this process's only: nothing persisted.
	path := filepath.Join(t.TempDir(), "probe.json")
	ft := NewTable("v1", "m", path)
	f := ft.Race("decode", "a", "b", "cpu")
	f.Fail(0)
	f.Fail(1)
	if f.Winner() != 2 {
		t.Fatal("both devices failed, host not chosen")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a verdict after failures was persisted (%v)", err)
	}
	// A declining arm falls through to the host and counts.
	g := tb.Race("declines", "dev", "cpu")
	for range 2 * DefaultConfig.DeclineLimit {
		arm, err := g.Step(context.Background(), func(_ context.Context, arm int) (bool, error) {
			if arm == 0 {
				return false, ErrDecline
			}
			return false, nil
		})
		if err != nil || arm != 1 {
			t.Fatalf("declined step ran arm %d, %v", arm, err)
		}
	}
	if g.Winner() != 1 {
		t.Error("declining device not settled on the host")
	}
}

func TestRaceCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "probe.json")
	arms := []string{"cuda:0:H200", "webgpu:H200", "cpu"}
	a := NewTable("v2", "m1", path)
	c := a.Race("decode llama", arms...)
	warm3(c)
	feed3(c, 2, 1*ms, 5*ms, 9*ms)
	if c.Winner() != 0 {
		t.Fatal("not decided")
	}
	entries, err := ReadCache(path)
	if err != nil || len(entries) != 1 || entries[0].Winner != "cuda:0:H200" || !slices.Equal(entries[0].Arms, arms) {
		t.Fatalf("persisted %+v, %v", entries, err)
	}
	// Adopted by the same arms in any order; not by another set of arms,
	// nor by the two-arm class of the same name.
	b := NewTable("v2", "m1", path)
	if w := b.Race("decode llama", "webgpu:H200", "cuda:0:H200", "cpu"); w.Arms()[w.Winner()] != "cuda:0:H200" {
		t.Fatal("verdict not adopted by the same arms")
	}
	if b.Race("decode llama", "webgpu:H200", "cpu").Winner() != -1 {
		t.Fatal("verdict adopted by another set of arms")
	}
	if b.Class("decode llama").Verdict() != Undecided {
		t.Fatal("verdict adopted by the two-arm class")
	}
}

// TestCacheMigration: a file written before races of several arms (no
// "arms") is read as the two-arm races it holds, adopted by Table.Class,
// and kept — rewritten with its arms — when a new verdict joins the file.
func TestCacheMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "probe.json")
	old := `{"entries":[
  {"version":"cortiq-decode-2","device":"webgpu:llvmpipe","class":"decode llama h64","winner":"host"},
  {"version":"cortiq-decode-2","device":"webgpu:llvmpipe","class":"ffn","winner":"device"}
]}`
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	entries, err := ReadCache(path)
	if err != nil || len(entries) != 2 || !slices.Equal(entries[0].Arms, []string{"device", "host"}) {
		t.Fatalf("old file read as %+v, %v", entries, err)
	}
	tb := NewTable("cortiq-decode-2", "webgpu:llvmpipe", path)
	if tb.Class("decode llama h64").Verdict() != HostWins || tb.Class("ffn").Verdict() != DeviceWins {
		t.Fatal("old verdicts not adopted by the two-arm API")
	}
	n := NewTable("v3", "webgpu:llvmpipe + cpu", path)
	c := n.Race("decode llama h64", "webgpu:llvmpipe", "cpu")
	c.RecordArm(0, 0, false)
	feed3(c, 2, 9*ms, 1*ms)
	data, _ := os.ReadFile(path)
	entries, err = ParseCache(data)
	if err != nil || len(entries) != 3 || strings.Count(string(data), `"arms"`) != 3 {
		t.Fatalf("after a new verdict: %d entries, %v\n%s", len(entries), err, data)
	}
	// Forget: by predicate; a missing file forgets nothing.
	if k, err := Forget(path, func(e Entry) bool { return e.Version != "v3" }); err != nil || k != 2 {
		t.Fatalf("Forget of the old version: %d, %v", k, err)
	}
	if entries, _ := ReadCache(path); len(entries) != 1 || entries[0].Version != "v3" {
		t.Fatalf("after Forget: %+v", entries)
	}
	if k, err := Forget(filepath.Join(t.TempDir(), "none.json"), func(Entry) bool { return true }); k != 0 || err != nil {
		t.Fatalf("Forget of a missing file: %d, %v", k, err)
	}
	os.WriteFile(path, []byte("{not json"), 0o644)
	if _, err := Forget(path, func(Entry) bool { return true }); err == nil {
		t.Fatal("Forget rewrote a corrupt file without a word")
	}
	if data, _ := os.ReadFile(path); string(data) != "{not json" {
		t.Fatal("Forget touched a file it could not read")
	}
}

func TestRacePanicsOnBadArms(t *testing.T) {
	for _, arms := range [][]string{nil, {"cpu"}, {"a", "a"}, {"a", ""}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Race(%q) did not panic", arms)
				}
			}()
			newTestTable(t).Race("x", arms...)
		}()
	}
}

func TestDeferredFlush(t *testing.T) {
	path := filepath.Join(t.TempDir(), "probe.json")
	tb := NewTable("v1", "a + cpu", path)
	tb.Deferred = true
	c := tb.Race("decode", "a", "cpu")
	c.RecordArm(0, 0, false)
	feed3(c, 2, 1*ms, 9*ms)
	if c.Winner() != 0 {
		t.Fatal("not decided")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a deferred verdict was written before Flush (%v)", err)
	}
	tb.Flush()
	if entries, err := ReadCache(path); err != nil || len(entries) != 1 || entries[0].Winner != "a" {
		t.Fatalf("after Flush: %+v, %v", entries, err)
	}
}
