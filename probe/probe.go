// Package probe decides, by measurement, where an op class runs fastest on
// this machine — the device or the CPU, or, in a race of several named
// arms, which of several devices and the CPU — and remembers the answer.
//
// Why measure: submit and readback latency differ by an order of magnitude
// across driver stacks (a discrete card over PCIe, an integrated GPU, a
// software rasterizer), so no static threshold knows whether offloading an
// op pays off here. A class starts undecided; its calls take turns between
// its arms (a device arm and a timed host arm, or every arm of a race, the
// host last), each timed. The rules, each learned the hard way by the
// engine this one reimagines:
//
//   - Samples flagged cold (weights uploaded, buffers created during the
//     call) are discarded: they time a one-off cost, not the steady state.
//   - The first sample of each device arm is discarded too (Warmup):
//     pipelines compile on first use and not every such cost is flagged.
//   - The decision compares each arm's best sample, not means: means carry
//     one-off costs (page faults, compiles) nobody flagged.
//   - An early verdict comes once every arm has 2 samples and one is at
//     least EarlyGap (2x) faster than each other; close races wait for
//     Samples per arm (ties go to the earlier arm).
//   - A device that declines the work (refuses a shape, is not ready) gives
//     no timing; after DeclineLimit declines it is out of the race (with
//     two arms the host wins), or it would take its turn forever and pay a
//     failed attempt each time. An arm that fails (Fail) is out at once,
//     and the verdict the others reach is not persisted.
//   - Verdicts persist in a small JSON file keyed by engine version, device
//     (for a race, the raced devices) and class: probing can cost seconds
//     to minutes on slow devices, and the answer is the same every run. A
//     verdict from another version, device or set of arms is ignored.
//     Files written before races of several arms are read as the two-arm
//     races they were; Forget removes entries.
//
// A pause gate (Pause) takes the device away from every class while any
// holder is alive — a phase that must run on the host says so globally.
// HostScope marks a context whose work must stay on the host (the timed
// host arm), so nested calls do not re-enter the device and poison it.
package probe

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
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
	DeclineLimit int     // declines before a device arm is out of the race (16)
	Warmup       int     // samples discarded first, per device arm (1)
	EarlyGap     float64 // best-sample ratio that decides early (2)
}

// DefaultConfig is the configuration the engine uses.
var DefaultConfig = Config{Samples: 6, DeclineLimit: 16, Warmup: 1, EarlyGap: 2}

// Class is the probe of one op class: a race between named arms, the last
// of which is the host (it never declines and pays no warm-up). A class
// from Table.Class has the two arms "device" and "host"; one from
// Table.Race has any number. Safe for concurrent use.
type Class struct {
	name string
	arms []string
	cfg  Config
	t    *Table

	mu        sync.Mutex
	winner    int // index into arms; -1 while undecided
	next      int // the arm the round robin tries next
	n         []int
	best      []time.Duration
	burned    []int
	declines  []int
	out       []bool
	noPersist bool // an arm failed: the verdict holds for this process only
}

func newClass(t *Table, name string, arms []string) *Class {
	k := len(arms)
	return &Class{name: name, arms: arms, cfg: t.Config, t: t, winner: -1,
		n: make([]int, k), best: make([]time.Duration, k), burned: make([]int, k),
		declines: make([]int, k), out: make([]bool, k)}
}

// Name of the class.
func (c *Class) Name() string { return c.name }

// Arms are the arms' names, the host last.
func (c *Class) Arms() []string { return slices.Clone(c.arms) }

func (c *Class) host() int { return len(c.arms) - 1 }

// Verdict is the class's decision so far: DeviceWins when any arm but the
// host won.
func (c *Class) Verdict() Verdict {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.winner {
	case -1:
		return Undecided
	case c.host():
		return HostWins
	}
	return DeviceWins
}

// Winner is the index of the winning arm, or -1 while undecided.
func (c *Class) Winner() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.winner
}

// Best is arm i's best clean sample so far and how many clean samples it
// has (0 when none). A verdict adopted from the cache has none.
func (c *Class) Best(i int) (time.Duration, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.best[i], c.n[i]
}

// Arm says where the next call of a two-arm class runs. While undecided
// it alternates, starting with the device.
func (c *Class) Arm() Arm {
	i, timed := c.Next()
	switch {
	case i != c.host():
		return Device
	case timed:
		return HostTimed
	}
	return Host
}

// Next says which arm runs the next call and whether it is timed: while
// undecided the arms still in the race take turns, in order, starting
// with the first; a decided class runs its winner untimed, a paused table
// the host.
func (c *Class) Next() (arm int, timed bool) {
	if c.t != nil && c.t.Paused() {
		return c.host(), false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.winner >= 0 {
		return c.winner, false
	}
	for range len(c.arms) {
		i := c.next % len(c.arms)
		c.next = i + 1
		if !c.out[i] {
			return i, true
		}
	}
	return c.host(), false // unreachable: the host is never out
}

// Decline records that the device arm of a two-arm class was chosen and
// refused the work.
func (c *Class) Decline() { c.DeclineArm(0) }

// DeclineArm records that arm i was chosen and refused the work; after
// DeclineLimit declines it is out of the race. When only one arm is left
// it wins.
func (c *Class) DeclineArm(i int) {
	c.mu.Lock()
	if c.winner >= 0 || i == c.host() || c.out[i] {
		c.mu.Unlock()
		return
	}
	c.declines[i]++
	if c.declines[i] >= c.cfg.DeclineLimit {
		c.out[i] = true
	}
	c.settle(c.decide())
}

// Fail takes arm i out of the race because it failed (an error, not a
// decline). The verdict the others then reach holds for this process but
// is not persisted: a transient fault must not be remembered as slowness.
func (c *Class) Fail(i int) {
	c.mu.Lock()
	if c.winner >= 0 || i == c.host() {
		c.mu.Unlock()
		return
	}
	c.out[i], c.noPersist = true, true
	c.settle(c.decide())
}

// Record adds one timed sample of a two-arm class: device or host.
func (c *Class) Record(device bool, d time.Duration, cold bool) {
	i := c.host()
	if device {
		i = 0
	}
	c.RecordArm(i, d, cold)
}

// RecordArm adds one timed sample of arm i; cold marks a call that paid a
// one-off cost (it is discarded), as is each device arm's first Warmup.
func (c *Class) RecordArm(i int, d time.Duration, cold bool) {
	c.mu.Lock()
	if c.winner >= 0 || cold || c.out[i] {
		c.mu.Unlock()
		return
	}
	if i != c.host() && c.burned[i] < c.cfg.Warmup {
		c.burned[i]++
		c.mu.Unlock()
		return
	}
	if c.n[i] == 0 || d < c.best[i] {
		c.best[i] = d
	}
	c.n[i]++
	c.settle(c.decide())
}

// settle records winner w (if any), unlocks, and persists the verdict.
// c.mu is held on entry.
func (c *Class) settle(w int) {
	if w < 0 {
		c.mu.Unlock()
		return
	}
	c.winner = w
	persist := !c.noPersist
	c.mu.Unlock()
	if persist {
		c.t.remember(c)
	}
}

// decide applies the rules to the arms still in the race: the last arm
// standing wins; otherwise, once each has 2 samples, the best sample wins
// if it beats every other by EarlyGap, or once each has Samples, outright
// (ties go to the earlier arm). c.mu is held.
func (c *Class) decide() int {
	live, w := 0, -1
	for i := range c.arms {
		if !c.out[i] {
			live++
			w = i
		}
	}
	if live == 1 {
		return w
	}
	full := true
	w = -1
	for i := range c.arms {
		if c.out[i] {
			continue
		}
		if c.n[i] < 2 {
			return -1
		}
		if c.n[i] < c.cfg.Samples {
			full = false
		}
		if w < 0 || c.best[i] < c.best[w] {
			w = i
		}
	}
	if !full {
		for i := range c.arms {
			if i != w && !c.out[i] && float64(c.best[w])*c.cfg.EarlyGap > float64(c.best[i]) {
				return -1
			}
		}
	}
	return w
}

// ErrDecline is returned by a device arm that refuses the work; Run then
// runs the host arm and counts the decline.
var ErrDecline = errors.New("probe: device declined")

// Run executes one call of a two-arm class on the arm Arm picks, timing
// and recording it while the class is undecided. device reports whether
// the call paid a one-off cost (cold). The host arm runs under HostScope.
// A device error other than ErrDecline is returned as is (the caller's
// fallback decides what to do).
func (c *Class) Run(ctx context.Context, device func(context.Context) (cold bool, err error), host func(context.Context) error) error {
	_, err := c.Step(ctx, func(ctx context.Context, arm int) (bool, error) {
		if arm == c.host() {
			return false, host(ctx)
		}
		return device(ctx)
	})
	return err
}

// Step executes one call on the arm Next picks, timing and recording it
// while the class is undecided; run(ctx, arm) does the work and reports
// whether it paid a one-off cost. A device arm that returns ErrDecline
// counts a decline and the host arm runs instead. The host arm runs under
// HostScope, and inside a HostScope only the host runs. Step returns the
// arm that ran; an error other than ErrDecline is returned as is (the
// caller decides: Fail takes a faulty arm out of the race).
func (c *Class) Step(ctx context.Context, run func(ctx context.Context, arm int) (cold bool, err error)) (int, error) {
	arm, timed := c.host(), false
	if !HostOnly(ctx) {
		arm, timed = c.Next()
	}
	if arm == c.host() {
		ctx = HostScope(ctx)
	}
	now := c.t.now
	start := now()
	cold, err := run(ctx, arm)
	if arm != c.host() && errors.Is(err, ErrDecline) {
		c.DeclineArm(arm)
		h := c.host()
		_, err = run(HostScope(ctx), h)
		return h, err
	}
	if err != nil {
		return arm, err
	}
	if timed {
		c.RecordArm(arm, now().Sub(start), cold)
	}
	return arm, nil
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

// Table holds the classes of one device (or, for races of several arms,
// one set of devices) and their persisted verdicts.
type Table struct {
	Version string // engine version: a verdict from another is ignored
	Device  string // adapter identity (or the raced devices'): likewise
	Path    string // cache file; "" = no persistence
	Config  Config
	// Now is the clock (tests substitute a fake one).
	Now func() time.Time
	// Deferred holds verdicts back from the file until Flush (a caller
	// racing several classes in one go writes all or, cancelled, none).
	Deferred bool

	mu      sync.Mutex
	held    []*Class
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

// Two-arm classes' arm names (Table.Class).
const (
	ArmDevice = "device"
	ArmHost   = "host"
)

// Class returns the two-arm (device, host) probe of class name, adopting a
// cached verdict the first time the table is used.
func (t *Table) Class(name string) *Class { return t.Race(name, ArmDevice, ArmHost) }

// Race returns the probe of class name between the named arms (at least
// two, distinct; the last is the host), adopting a cached verdict the
// first time the table is used. A cached verdict counts only for the same
// set of arms. Race panics on fewer than two arms or a repeated name.
func (t *Table) Race(name string, arms ...string) *Class {
	if err := checkArms(arms); err != nil {
		panic(err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.loaded {
		t.loaded = true
		t.loadLocked()
	}
	k := classKey(name, arms)
	if c, ok := t.classes[k]; ok {
		return c
	}
	c := newClass(t, name, slices.Clone(arms))
	if t.classes == nil {
		t.classes = map[string]*Class{}
	}
	t.classes[k] = c
	return c
}

// Lookup returns a decided class named name, whatever its arms (the
// cached verdict of a race whose arms the caller cannot tell without
// opening them), or nil.
func (t *Table) Lookup(name string) *Class {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.loaded {
		t.loaded = true
		t.loadLocked()
	}
	var found *Class
	for _, c := range t.classes {
		if c.name == name && c.Winner() >= 0 && (found == nil || strings.Join(c.arms, "\x00") < strings.Join(found.arms, "\x00")) {
			found = c
		}
	}
	return found
}

// classKey identifies a class by name and its set of arms.
func classKey(name string, arms []string) string {
	s := slices.Clone(arms)
	slices.Sort(s)
	return name + "\x00" + strings.Join(s, "\x00")
}

func checkArms(arms []string) error {
	if len(arms) < 2 {
		return fmt.Errorf("probe: a race of %d arms", len(arms))
	}
	for i, a := range arms {
		if a == "" || slices.Contains(arms[:i], a) {
			return fmt.Errorf("probe: arm %d of %q empty or repeated", i, arms)
		}
	}
	return nil
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
	Winner  string `json:"winner"` // one of Arms
	// Arms are the raced arms, the host last. A file written before races
	// of several arms has none: ParseCache reads such an entry as the
	// two-arm race ("device", "host") it was.
	Arms []string `json:"arms"`
}

type cacheFile struct {
	Entries []Entry `json:"entries"`
}

// maxCacheBytes bounds the cache file read: it holds a handful of lines.
const maxCacheBytes = 1 << 20

// ParseCache decodes a cache file's bytes, in either format (entries with
// or without arms).
func ParseCache(data []byte) ([]Entry, error) {
	if len(data) > maxCacheBytes {
		return nil, fmt.Errorf("probe: cache of %d bytes exceeds %d", len(data), maxCacheBytes)
	}
	var f cacheFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("probe: cache: %w", err)
	}
	for i := range f.Entries {
		e := &f.Entries[i]
		if e.Arms == nil {
			if e.Winner != ArmDevice && e.Winner != ArmHost {
				return nil, fmt.Errorf("probe: cache entry %d: winner %q", i, e.Winner)
			}
			e.Arms = []string{ArmDevice, ArmHost}
			continue
		}
		if err := checkArms(e.Arms); err != nil {
			return nil, fmt.Errorf("probe: cache entry %d: %w", i, err)
		}
		if !slices.Contains(e.Arms, e.Winner) {
			return nil, fmt.Errorf("probe: cache entry %d: winner %q not among its arms %q", i, e.Winner, e.Arms)
		}
	}
	return f.Entries, nil
}

// ReadCache reads the cache file at path; a missing file has no entries.
func ReadCache(path string) ([]Entry, error) {
	data, err := readLimited(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	entries, err := ParseCache(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return entries, nil
}

// Forget removes the entries of the cache file at path that drop reports
// true for, and returns how many it removed. A missing file has none; an
// unreadable one is an error (it is not rewritten).
func Forget(path string, drop func(Entry) bool) (int, error) {
	entries, err := ReadCache(path)
	if err != nil || len(entries) == 0 {
		return 0, err
	}
	kept := slices.DeleteFunc(slices.Clone(entries), drop)
	if len(kept) == len(entries) {
		return 0, nil
	}
	return len(entries) - len(kept), writeCache(path, kept)
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
		arms := e.Arms
		if arms == nil {
			arms = []string{ArmDevice, ArmHost}
		}
		w := slices.Index(arms, e.Winner)
		if checkArms(arms) != nil || w < 0 {
			continue
		}
		k := classKey(e.Class, arms)
		c, ok := t.classes[k]
		if !ok {
			c = newClass(t, e.Class, slices.Clone(arms))
			if t.classes == nil {
				t.classes = map[string]*Class{}
			}
			t.classes[k] = c
		}
		c.mu.Lock()
		if c.winner < 0 {
			c.winner = slices.Index(c.arms, e.Winner)
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

// remember persists class c's verdict, best effort: a read-only
// cache directory costs a re-probe next run, never a failure. Entries of
// other versions, devices and classes are kept; an entry of an older
// format is rewritten with its arms.
func (t *Table) remember(c *Class) {
	if t == nil || t.Path == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.Deferred {
		t.held = append(t.held, c)
		return
	}
	t.writeLocked([]*Class{c})
}

// Flush writes the verdicts Deferred held back (best effort, as ever).
func (t *Table) Flush() {
	if t == nil || t.Path == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.held) > 0 {
		t.writeLocked(t.held)
		t.held = nil
	}
}

// writeLocked merges the verdicts of decided classes cs into the file.
// t.mu is held.
func (t *Table) writeLocked(cs []*Class) {
	var entries []Entry
	if data, err := readLimited(t.Path); err == nil {
		entries, _ = ParseCache(data)
	}
	for _, c := range cs {
		w := c.Winner()
		if w < 0 {
			continue
		}
		e := Entry{Version: t.Version, Device: t.Device, Class: c.name, Winner: c.arms[w], Arms: c.arms}
		k := classKey(c.name, c.arms)
		replaced := false
		for i, old := range entries {
			if old.Version == e.Version && old.Device == e.Device && classKey(old.Class, old.Arms) == k {
				entries[i] = e
				replaced = true
			}
		}
		if !replaced {
			entries = append(entries, e)
		}
	}
	writeCache(t.Path, entries)
}

// writeCache replaces the file at path with entries, sorted, atomically
// (a temporary file renamed over it).
func writeCache(path string, entries []Entry) error {
	sort.SliceStable(entries, func(i, j int) bool {
		a, b := entries[i], entries[j]
		if a.Device != b.Device {
			return a.Device < b.Device
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		return a.Class < b.Class
	})
	if entries == nil {
		entries = []Entry{}
	}
	data, err := json.MarshalIndent(cacheFile{Entries: entries}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".probe-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(append(data, '\n'))
	cerr := tmp.Close()
	if err := cmp.Or(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
