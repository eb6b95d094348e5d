//go:build !js

package gpu

import (
	"encoding/binary"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/cogentcore/webgpu/wgpu"
)

// maxProfiled bounds the dispatches timed per Run (a query set's size);
// later ones in a longer Run go untimed.
const maxProfiled = 4096

type profiler struct {
	qs      *wgpu.QuerySet
	resolve *Buffer
	staging *Buffer

	mu    sync.Mutex
	stats map[string]*profStat
}

type profStat struct {
	n  int
	ns float64
}

// profileFeatures is what openNative asks the device for when profiling
// (Profile.Timestamps).
func profileFeatures(ad *wgpu.Adapter, p Profile) []wgpu.FeatureName {
	if p.Timestamps && ad.HasFeature(wgpu.FeatureNameTimestampQuery) {
		return []wgpu.FeatureName{wgpu.FeatureNameTimestampQuery}
	}
	return nil
}

func (d *Device) startProfiler() error {
	qs, err := d.dev.CreateQuerySet(&wgpu.QuerySetDescriptor{Label: "profile", Type: wgpu.QueryTypeTimestamp, Count: maxProfiled + 1})
	if err != nil {
		return fmt.Errorf("webgpu: profile query set: %w", err)
	}
	p := &profiler{qs: qs, stats: map[string]*profStat{}}
	if p.resolve, err = d.NewBuffer("profile resolve", 8*(maxProfiled+1), wgpu.BufferUsageQueryResolve|wgpu.BufferUsageCopySrc); err != nil {
		return err
	}
	if p.staging, err = d.NewStaging("profile staging", 8*(maxProfiled+1)); err != nil {
		return err
	}
	d.prof = p
	profiledMu.Lock()
	profiled = append(profiled, d)
	profiledMu.Unlock()
	return nil
}

var (
	profiledMu sync.Mutex
	profiled   []*Device
)

// stopProfiler releases the profiler's query set and buffers; a closed
// device leaves the reports.
func (d *Device) stopProfiler() {
	p := d.prof
	if p == nil {
		return
	}
	d.prof = nil
	p.qs.Release()
	p.resolve.Release()
	p.staging.Release()
	profiledMu.Lock()
	defer profiledMu.Unlock()
	for i, x := range profiled {
		if x == d {
			profiled = append(profiled[:i], profiled[i+1:]...)
			break
		}
	}
}

// ProfileReport is the report of every device opened under
// Profile.Timestamps (Device.ProfileReport); empty when not profiling.
func ProfileReport() string {
	profiledMu.Lock()
	defer profiledMu.Unlock()
	var b strings.Builder
	for _, d := range profiled {
		b.WriteString(d.ProfileReport())
	}
	return b.String()
}

// runProfiled is Run with a timestamp around each dispatch: one compute
// pass per dispatch, then a wait for the timestamps.
func (d *Device) runProfiled(pre []Copy, ds []Dispatch, post []Copy) error {
	p := d.prof
	enc, err := d.dev.CreateCommandEncoder(&wgpu.CommandEncoderDescriptor{})
	if err != nil {
		return fmt.Errorf("webgpu: command encoder: %w", err)
	}
	defer enc.Release()
	if err := encodeCopies(enc, pre); err != nil {
		return err
	}
	var labels []string
	for _, x := range ds {
		if x.X == 0 || x.Y == 0 || x.Z == 0 || d.skipped(x.Label) {
			continue
		}
		timed := len(labels) < maxProfiled
		if timed && len(labels) == 0 {
			if err := enc.WriteTimestamp(p.qs, 0); err != nil {
				return fmt.Errorf("webgpu: timestamp: %w", err)
			}
		}
		pass := enc.BeginComputePass(nil)
		pass.SetPipeline(x.P.pipe)
		pass.SetBindGroup(0, x.G, nil)
		pass.DispatchWorkgroups(x.X, x.Y, x.Z)
		pass.End()
		pass.Release()
		if timed {
			labels = append(labels, x.Label)
			if err := enc.WriteTimestamp(p.qs, uint32(len(labels))); err != nil {
				return fmt.Errorf("webgpu: timestamp: %w", err)
			}
		}
	}
	n := uint64(len(labels) + 1)
	if len(labels) > 0 {
		if err := enc.ResolveQuerySet(p.qs, 0, uint32(n), p.resolve.b, 0); err != nil {
			return fmt.Errorf("webgpu: resolve timestamps: %w", err)
		}
		if err := enc.CopyBufferToBuffer(p.resolve.b, 0, p.staging.b, 0, 8*n); err != nil {
			return fmt.Errorf("webgpu: copy: %w", err)
		}
	}
	if err := encodeCopies(enc, post); err != nil {
		return err
	}
	cb, err := enc.Finish(nil)
	if err != nil {
		return fmt.Errorf("webgpu: finish: %w", err)
	}
	defer cb.Release()
	d.queue.Submit(cb)
	if len(labels) == 0 {
		return d.Err()
	}
	raw := make([]byte, 8*n)
	if err := d.readInto(p.staging, raw); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	prev := binary.LittleEndian.Uint64(raw)
	for i, l := range labels {
		t := binary.LittleEndian.Uint64(raw[8*(i+1):])
		k := profileClass(l)
		st := p.stats[k]
		if st == nil {
			st = &profStat{}
			p.stats[k] = st
		}
		st.n++
		if t > prev {
			// Vulkan timestamps tick in nanoseconds on NVIDIA (the
			// binding does not expose the queue's timestamp period).
			st.ns += float64(t - prev)
		}
		prev = t
	}
	return nil
}

var layerPrefix = regexp.MustCompile(`^L\d+ `)

// profileClass folds the per-layer labels ("L12 gate/up") into one class.
func profileClass(label string) string {
	if label == "" {
		return "(unlabelled)"
	}
	return layerPrefix.ReplaceAllString(label, "")
}

// ProfileReport is the per-kernel-class GPU time gathered under
// Profile.Timestamps since the last report, largest first; empty when
// not profiling.
func (d *Device) ProfileReport() string {
	p := d.prof
	if p == nil {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	type row struct {
		k string
		profStat
	}
	var rows []row
	var total float64
	for k, st := range p.stats {
		rows = append(rows, row{k, *st})
		total += st.ns
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].ns > rows[j].ns })
	var b strings.Builder
	fmt.Fprintf(&b, "GPU time by kernel class (one pass per dispatch; %.1f ms in all)\n", total/1e6)
	for _, r := range rows {
		fmt.Fprintf(&b, "%8.2f ms %5.1f%% %7d × %8.2f µs  %s\n", r.ns/1e6, 100*r.ns/total, r.n, r.ns/float64(r.n)/1e3, r.k)
	}
	p.stats = map[string]*profStat{}
	return b.String()
}
