// Package probe decides, by measurement, whether an op class runs faster on
// the device or on the CPU on this machine, and remembers the answer.
//
// Why measure: submit and readback latency differ by an order of magnitude
// across driver stacks (a discrete card over PCIe, an integrated GPU, a
// software rasterizer), so no static threshold knows whether offloading an
// op pays off here. A class starts undecided; its calls alternate between a
// timed device arm and a timed host arm. The rules, each learned the hard
// way by the engine this one reimagines:
//
//   - Samples flagged cold (weights uploaded, buffers created during the
//     call) are discarded: they time a one-off cost, not the steady state.
//   - The first device sample is discarded too (Warmup): pipelines compile
//     on first use and not every such cost is flagged.
//   - The decision compares each arm's best sample, not means: means carry
//     one-off costs (page faults, compiles) nobody flagged.
//   - An early verdict comes once both arms have 2 samples and one is at
//     least EarlyGap (2x) faster; close races wait for Samples per arm.
//   - A device that declines the work (refuses a shape, is not ready) gives
//     no timing; after DeclineLimit declines the class settles on the host,
//     or it would alternate forever and pay a failed attempt every other call.
//   - Verdicts persist in a small JSON file keyed by engine version, device
//     and class: probing can cost seconds to minutes on slow devices, and the
//     answer is the same every run. A verdict from another version or device
//     is ignored.
//
// A pause gate (Pause) takes the device away from every class while any
// holder is alive — a phase that must run on the host says so globally.
// HostScope marks a context whose work must stay on the host (the timed
// host arm), so nested calls do not re-enter the device and poison it.
package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Arm is where one call runs.
type Arm uint8

const (
	Device    Arm = iota // run on the device (timed while probing)
	HostTimed            // probing: run on the host, timed
	Host                 // decided (or paused): run on the host
)

func (a Arm) String() string {
	switch a {
	case Device:
		return "device"
	case HostTimed:
		return "host-timed"
	}
	return "host"
}

// Verdict is a class's decision.
type Verdict uint8

const (
	Undecided Verdict = iota
	DeviceWins
	HostWins
)

func (v Verdict) String() string {
	switch v {
	case DeviceWins:
		return "device"
	case HostWins:
		return "host"
	}
	return "undecided"
}

// Config are the probing rules' constants.
type Config struct {
	Samples      int     // clean samples per arm before a close race decides (6)
	DeclineLimit int     // device declines before the host wins (16)
	Warmup       int     // device samples discarded first (1)
	EarlyGap     float64 // best-sample ratio that decides early (2)
}

// DefaultConfig is the configuration the engine uses.
var DefaultConfig = Config{Samples: 6, DeclineLimit: 16, Warmup: 1, EarlyGap: 2}

// Class is the probe of one op class. Safe for concurrent use.
type Class struct {
	name string
	cfg  Config
	t    *Table

	mu               sync.Mutex
	verdict          Verdict
	flip             uint64
	devN, hostN      int
	devMin, hostMin  time.Duration
	declines, burned int
}

// Name of the class.
func (c *Class) Name() string { return c.name }

// Verdict is the class's decision so far.
func (c *Class) Verdict() Verdict {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.verdict
}

// Arm says where the next call runs. While undecided it alternates,
// starting with the device.
func (c *Class) Arm() Arm {
	if c.t != nil && c.t.Paused() {
		return Host
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.verdict {
	case DeviceWins:
		return Device
	case HostWins:
		return Host
	}
	c.flip++
	if c.flip%2 == 1 {
		return Device
	}
	return HostTimed
}

// Decline records that the device arm was chosen and refused the work.
func (c *Class) Decline() {
	c.mu.Lock()
	if c.verdict != Undecided {
		c.mu.Unlock()
		return
	}
	c.declines++
	decided := c.declines >= c.cfg.DeclineLimit
	if decided {
		c.verdict = HostWins
	}
	c.mu.Unlock()
	if decided {
		c.t.remember(c.name, HostWins)
	}
}

// Record adds one timed sample of an arm; cold marks a call that paid a
// one-off cost (it is discarded).
func (c *Class) Record(device bool, d time.Duration, cold bool) {
	c.mu.Lock()
	if c.verdict != Undecided || cold {
		c.mu.Unlock()
		return
	}
	if device && c.burned < c.cfg.Warmup {
		c.burned++
		c.mu.Unlock()
		return
	}
	if device {
		if c.devN == 0 || d < c.devMin {
			c.devMin = d
		}
		c.devN++
	} else {
		if c.hostN == 0 || d < c.hostMin {
			c.hostMin = d
		}
		c.hostN++
	}
	v := c.decide()
	if v != Undecided {
		c.verdict = v
	}
	c.mu.Unlock()
	if v != Undecided {
		c.t.remember(c.name, v)
	}
}

func (c *Class) decide() Verdict {
	if c.devN < 2 || c.hostN < 2 {
		return Undecided
	}
	g, h := float64(c.devMin), float64(c.hostMin)
	full := c.devN >= c.cfg.Samples && c.hostN >= c.cfg.Samples
	if !full && g*c.cfg.EarlyGap > h && h*c.cfg.EarlyGap > g {
		return Undecided
	}
	if g <= h {
		return DeviceWins
	}
	return HostWins
}

// ErrDecline is returned by a device arm that refuses the work; Run then
// runs the host arm and counts the decline.
var ErrDecline = errors.New("probe: device declined")

// Run executes one call of the class on the arm Arm picks, timing and
// recording it while the class is undecided. device reports whether the
// call paid a one-off cost (cold). The host arm runs under HostScope. A
// device error other than ErrDecline is returned as is (the caller's
// fallback decides what to do).
func (c *Class) Run(ctx context.Context, device func(context.Context) (cold bool, err error), host func(context.Context) error) error {
	arm := Host
	if !HostOnly(ctx) {
		arm = c.Arm()
	}
	now := c.t.now
	switch arm {
	case Device:
		start := now()
		cold, err := device(ctx)
		if errors.Is(err, ErrDecline) {
			c.Decline()
			return host(HostScope(ctx))
		}
		if err != nil {
			return err
		}
		c.Record(true, now().Sub(start), cold)
		return nil
	case HostTimed:
		start := now()
		if err := host(HostScope(ctx)); err != nil {
			return err
		}
		c.Record(false, now().Sub(start), false)
		return nil
	}
	return host(HostScope(ctx))
}

type hostKey struct{}

// HostScope returns a context whose work must stay on the host.
func HostScope(ctx context.Context) context.Context {
	return context.WithValue(ctx, hostKey{}, true)
}

// HostOnly reports whether ctx is inside a HostScope.
func HostOnly(ctx context.Context) bool {
	v, _ := ctx.Value(hostKey{}).(bool)
	return v
}

// Table holds the classes of one device and their persisted verdicts.
type Table struct {
	Version string // engine version: a verdict from another is ignored
	Device  string // adapter identity: likewise
	Path    string // cache file; "" = no persistence
	Config  Config
	// Now is the clock (tests substitute a fake one).
	Now func() time.Time

	mu      sync.Mutex
	classes map[string]*Class
	loaded  bool
	paused  atomic.Int64
}

// NewTable returns a table for one device. path may be "" (no cache).
func NewTable(version, device, path string) *Table {
	return &Table{Version: version, Device: device, Path: path, Config: DefaultConfig, Now: time.Now}
}

func (t *Table) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

// Class returns the probe of class name, adopting a cached verdict the
// first time the table is used.
func (t *Table) Class(name string) *Class {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.loaded {
		t.loaded = true
		t.loadLocked()
	}
	if c, ok := t.classes[name]; ok {
		return c
	}
	c := &Class{name: name, cfg: t.Config, t: t}
	if t.classes == nil {
		t.classes = map[string]*Class{}
	}
	t.classes[name] = c
	return c
}

// Pause takes the device away from every class until the returned resume
// is called, and until every other holder has resumed too (a count, not a
// flag, so overlapping phases cannot lift each other's pause). resume is
// idempotent.
func (t *Table) Pause() (resume func()) {
	t.paused.Add(1)
	var once sync.Once
	return func() { once.Do(func() { t.paused.Add(-1) }) }
}

// Paused reports whether any pause is held.
func (t *Table) Paused() bool { return t.paused.Load() > 0 }

// Entry is one persisted verdict.
type Entry struct {
	Version string `json:"version"`
	Device  string `json:"device"`
	Class   string `json:"class"`
	Winner  string `json:"winner"` // "device" or "host"
}

type cacheFile struct {
	Entries []Entry `json:"entries"`
}

// maxCacheBytes bounds the cache file read: it holds a handful of lines.
const maxCacheBytes = 1 << 20

// ParseCache decodes a cache file's bytes.
func ParseCache(data []byte) ([]Entry, error) {
	if len(data) > maxCacheBytes {
		return nil, fmt.Errorf("probe: cache of %d bytes exceeds %d", len(data), maxCacheBytes)
	}
	var f cacheFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("probe: cache: %w", err)
	}
	for i, e := range f.Entries {
		if e.Winner != "device" && e.Winner != "host" {
			return nil, fmt.Errorf("probe: cache entry %d: winner %q", i, e.Winner)
		}
	}
	return f.Entries, nil
}

// Adopt applies the entries that match this table's version and device; a
// class already decided keeps its verdict.
func (t *Table) Adopt(entries []Entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.adoptLocked(entries)
}

func (t *Table) adoptLocked(entries []Entry) {
	for _, e := range entries {
		if e.Version != t.Version || e.Device != t.Device || e.Class == "" {
			continue
		}
		v := HostWins
		if e.Winner == "device" {
			v = DeviceWins
		}
		c, ok := t.classes[e.Class]
		if !ok {
			c = &Class{name: e.Class, cfg: t.Config, t: t}
			if t.classes == nil {
				t.classes = map[string]*Class{}
			}
			t.classes[e.Class] = c
		}
		c.mu.Lock()
		if c.verdict == Undecided {
			c.verdict = v
		}
		c.mu.Unlock()
	}
}

// loadLocked adopts the cache file's verdicts; a missing or unreadable file
// just means probing again. t.mu is held.
func (t *Table) loadLocked() {
	if t.Path == "" {
		return
	}
	data, err := readLimited(t.Path)
	if err != nil {
		return
	}
	entries, err := ParseCache(data)
	if err != nil {
		return
	}
	t.adoptLocked(entries)
}

func readLimited(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Size() > maxCacheBytes {
		return nil, fmt.Errorf("probe: %s: %d bytes", path, st.Size())
	}
	return os.ReadFile(path)
}

// remember persists a verdict, best effort: a read-only cache directory
// costs a re-probe next run, never a failure.
func (t *Table) remember(class string, v Verdict) {
	if t == nil || t.Path == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var entries []Entry
	if data, err := readLimited(t.Path); err == nil {
		entries, _ = ParseCache(data)
	}
	e := Entry{Version: t.Version, Device: t.Device, Class: class, Winner: v.String()}
	replaced := false
	for i, old := range entries {
		if old.Version == e.Version && old.Device == e.Device && old.Class == e.Class {
			entries[i] = e
			replaced = true
		}
	}
	if !replaced {
		entries = append(entries, e)
	}
	sort.Slice(entries, func(i, j int) bool {
		a, b := entries[i], entries[j]
		if a.Device != b.Device {
			return a.Device < b.Device
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		return a.Class < b.Class
	})
	data, err := json.MarshalIndent(cacheFile{Entries: entries}, "", "  ")
	if err != nil {
		return
	}
	if err := os.MkdirAll(filepath.Dir(t.Path), 0o755); err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(t.Path), ".probe-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(append(data, '\n'))
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), t.Path) != nil {
		os.Remove(tmp.Name())
	}
}
