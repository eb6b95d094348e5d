package cuda

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/cuda/driver"
	"github.com/cortiq/cortiq/cuda/kernels"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// Part is a contiguous range of decoder layers [From, To) on one device.
type Part struct {
	Ordinal  int
	From, To int
}

func (p Part) String() string { return fmt.Sprintf("%d:%d-%d", p.Ordinal, p.From, p.To-1) }

// ParseParts reads per-device layer ranges, "0:0-13,1:14-27" (inclusive
// ranges, device ordinal before the colon), for a model of layers layers:
// the ranges must cover every layer once, in order.
func ParseParts(s string, layers int) ([]Part, error) {
	var parts []Part
	next := 0
	for _, f := range strings.Split(s, ",") {
		dev, rng, ok := strings.Cut(strings.TrimSpace(f), ":")
		lo, hi, ok2 := strings.Cut(rng, "-")
		d, err1 := strconv.Atoi(dev)
		a, err2 := strconv.Atoi(lo)
		b, err3 := strconv.Atoi(hi)
		if !ok || !ok2 || errors.Join(err1, err2, err3) != nil || d < 0 {
			return nil, fmt.Errorf("cuda: layer ranges %q: want device:first-last,... (e.g. 0:0-13,1:14-27)", s)
		}
		if a != next || b < a || b >= layers {
			return nil, fmt.Errorf("cuda: layer ranges %q: %q must start at layer %d and end before %d", s, f, next, layers)
		}
		parts = append(parts, Part{Ordinal: d, From: a, To: b + 1})
		next = b + 1
	}
	if next != layers {
		return nil, fmt.Errorf("cuda: layer ranges %q cover layers 0..%d of %d", s, next-1, layers)
	}
	return parts, nil
}

// LayerBytes is what each decoder layer holds on a device for a session
// of ctx positions (weights in their device layout, KV cache in f32), and
// the embedding's and the head's bytes.
func LayerBytes(m *model.Model, ctx int) (layers []int64, embed, head int64) {
	a := &m.Arch
	size := func(name string) int64 {
		t, ok := m.Weights.Tensor(name)
		if !ok {
			return 0
		}
		c := t.Codec.String()
		if !kernels.Supported(c) {
			n, _ := tensor.ByteLen(t.Codec, t.Shape)
			return n
		}
		return int64(t.Rows()) * int64(kernels.DeviceRowBytes(c, t.Cols()))
	}
	for i, l := range a.Layers {
		var n int64
		for _, w := range []string{model.AttnQ, model.AttnK, model.AttnV, model.AttnOut, model.FFNGate, model.FFNUp, model.FFNDown} {
			n += size(fmt.Sprintf("blk.%d.%s", i, w))
		}
		if l.Attn != nil {
			n += 2 * int64(ctx) * int64(l.Attn.KVHeads*l.Attn.HeadDim) * 4
		}
		layers = append(layers, n)
	}
	embed = size(model.TokenEmbd)
	head = embed
	if !a.TiedEmbeddings {
		head = size(model.Output)
	}
	return layers, embed, head
}

// PlanParts splits the layers over devices in proportion to their free
// memory (free[i] for ordinals[i]): contiguous ranges in device order, the
// first device also holding the embedding and the last the head. It fails
// when the model does not fit.
func PlanParts(ordinals []int, free []int64, layers []int64, embed, head int64) ([]Part, error) {
	if len(ordinals) == 0 || len(ordinals) != len(free) {
		return nil, fmt.Errorf("cuda: %d devices with %d free-memory figures", len(ordinals), len(free))
	}
	var total, avail int64
	for _, n := range layers {
		total += n
	}
	total += embed + head
	for _, f := range free {
		avail += max(f, 0)
	}
	if total > avail {
		return nil, fmt.Errorf("cuda: the model needs %d MiB, the devices have %d MiB free", total>>20, avail>>20)
	}
	// Each device's target is the layers' bytes in proportion to its free
	// memory; it takes layers while they fit its room (free memory less
	// the embedding on the first, the head on the last) and it is under
	// its target (the last device takes whatever is left that fits).
	weights := total - embed - head
	var parts []Part
	at := 0
	for d := range ordinals {
		room := free[d]
		if d == 0 {
			room -= embed
		}
		if d == len(ordinals)-1 {
			room -= head
		}
		target := weights * max(free[d], 0) / max(avail, 1)
		p := Part{Ordinal: ordinals[d], From: at}
		var used int64
		for at < len(layers) && used+layers[at] <= room && (used < target || d == len(ordinals)-1) {
			used += layers[at]
			at++
		}
		if p.To = at; p.To > p.From {
			parts = append(parts, p)
		}
	}
	if at != len(layers) || len(parts) == 0 || parts[0].Ordinal != ordinals[0] {
		return nil, fmt.Errorf("cuda: the layers do not fit the devices' free memory in order (layer %d left)", at)
	}
	return parts, nil
}

// OpenDevices opens a model on the devices listed (nil = device 0): one
// device is a Backend; several are a Split, by the explicit layer ranges
// when given ("0:0-13,1:14-27"), else by PlanParts from each device's
// measured free memory with a session of maxContext positions.
func OpenDevices(ctx context.Context, m *model.Model, opts Options, ordinals []int, ranges string, maxContext int) (backend.Backend, error) {
	var parts []Part
	switch {
	case ranges != "":
		var err error
		if parts, err = ParseParts(ranges, len(m.Arch.Layers)); err != nil {
			return nil, err
		}
	case len(ordinals) > 1:
		free := make([]int64, len(ordinals))
		for i, o := range ordinals {
			d, err := OpenDevice(o)
			if err != nil {
				return nil, err
			}
			f, _, err := d.MemInfo()
			d.Close()
			if err != nil {
				return nil, err
			}
			free[i] = f - f/20
		}
		layers, embed, head := LayerBytes(m, maxContext)
		var err error
		if parts, err = PlanParts(ordinals, free, layers, embed, head); err != nil {
			return nil, err
		}
	}
	if len(parts) <= 1 {
		if len(parts) == 1 {
			opts.Ordinal = parts[0].Ordinal
		} else if len(ordinals) == 1 {
			opts.Ordinal = ordinals[0]
		}
		return Open(ctx, m, opts)
	}
	return OpenSplit(ctx, m, opts, parts)
}

// Split is one model over several devices: each Part's layers on its
// device, the hidden states handed from one to the next through the host.
// Decoding reads the logits back and picks on the host (no greedy graphs
// across devices).
type Split struct {
	parts []*Backend
	arch  *model.Arch
	name  string
}

// OpenSplit opens every part (opts.Ordinal, From, To are taken from each
// Part; opts.Device must be nil: OpenDevice opens each).
func OpenSplit(ctx context.Context, m *model.Model, opts Options, parts []Part) (*Split, error) {
	if err := Check(&m.Arch); err != nil {
		return nil, err
	}
	sp := &Split{arch: &m.Arch}
	var names []string
	for _, p := range parts {
		o := opts
		o.Ordinal, o.From, o.To, o.Device = p.Ordinal, p.From, p.To, nil
		b, err := Open(ctx, m, o)
		if err != nil {
			sp.Close()
			return nil, fmt.Errorf("cuda: part %s: %w", p, err)
		}
		sp.parts = append(sp.parts, b)
		names = append(names, b.name)
	}
	sp.name = strings.Join(names, "+")
	return sp, nil
}

// Name lists the parts' devices and layer ranges.
func (sp *Split) Name() string { return sp.name }

// Close closes every part.
func (sp *Split) Close() error {
	var errs []error
	for _, b := range sp.parts {
		errs = append(errs, b.Close())
	}
	return errors.Join(errs...)
}

// Stats sums the parts' counters.
func (sp *Split) Stats() backend.Stats {
	var s backend.Stats
	for _, b := range sp.parts {
		p := b.Stats()
		s.UploadBytes += p.UploadBytes
		s.ResidentBytes += p.ResidentBytes
		s.ReadbackBytes += p.ReadbackBytes
		s.Submits += p.Submits
		s.WeightBytesToken += p.WeightBytesToken
	}
	s.Tokens = sp.parts[len(sp.parts)-1].Stats().Tokens
	if s.Tokens > 0 {
		s.SubmitsPerToken = float64(s.Submits) / float64(s.Tokens)
	}
	return s
}

// NewSession allocates a session on every part.
func (sp *Split) NewSession(maxLen int) (backend.Session, error) {
	ss := &splitSession{sp: sp, maxLen: maxLen}
	for _, b := range sp.parts {
		s, err := b.newSession(maxLen)
		if err != nil {
			ss.Close()
			return nil, err
		}
		ss.parts = append(ss.parts, s)
	}
	return ss, nil
}

type splitSession struct {
	sp     *Split
	parts  []*Session
	maxLen int
	pos    int
}

func (ss *splitSession) Len() int { return ss.pos }

func (ss *splitSession) Reset() {
	ss.pos = 0
	for _, s := range ss.parts {
		s.Reset()
	}
}

func (ss *splitSession) Close() error {
	var errs []error
	for _, s := range ss.parts {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

func (ss *splitSession) Rewindable() int { return ss.pos }

func (ss *splitSession) Rewind(n int) error {
	if n < 0 || n > ss.pos {
		return fmt.Errorf("cuda: rewind of %d positions, %d rewindable", n, ss.pos)
	}
	for _, s := range ss.parts {
		s.Rewind(n)
	}
	ss.pos -= n
	return nil
}

// Forward runs each chunk through the parts in turn.
func (ss *splitSession) Forward(tokens []int, all bool) ([]float32, error) {
	a := ss.sp.arch
	if len(tokens) == 0 {
		return nil, fmt.Errorf("cuda: forward of no tokens")
	}
	if ss.pos+len(tokens) > ss.maxLen {
		return nil, fmt.Errorf("cuda: %d positions + %d tokens exceed the session length %d", ss.pos, len(tokens), ss.maxLen)
	}
	for _, t := range tokens {
		if t < 0 || t >= a.Vocab {
			return nil, fmt.Errorf("cuda: token %d outside the vocabulary of %d", t, a.Vocab)
		}
	}
	chunk := ss.parts[0].chunk
	var out []float32
	for t0 := 0; t0 < len(tokens); t0 += chunk {
		ch := tokens[t0:min(len(tokens), t0+chunk)]
		T := len(ch)
		var hidden []float32
		for i, s := range ss.parts {
			rows, h, err := ss.runPart(s, i, ch, hidden, all, t0+T == len(tokens))
			if err != nil {
				return nil, err
			}
			hidden = h
			out = append(out, rows...)
		}
		ss.pos += T
	}
	return out, nil
}

// runPart runs one part over a chunk: from the token ids (the first part)
// or the hidden rows the previous part handed over; it hands its own rows
// on, or (the last part) returns the logits owed.
func (ss *splitSession) runPart(s *Session, i int, ch []int, hidden []float32, all, last bool) (logits, out []float32, err error) {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	T := len(ch)
	H := b.arch.Hidden
	if i == 0 {
		err = s.upload(ch)
	} else if err = s.setState(s.pos, 0); err == nil {
		err = b.dev.Upload(s.x, driver.Bytes(hidden))
	}
	if err == nil {
		err = s.layers(T, 0)
	}
	if err != nil {
		return nil, nil, err
	}
	b.stats.Submits++
	if !b.last {
		out = make([]float32, T*H)
		if err := b.dev.Read(driver.Bytes(out), s.x); err != nil {
			return nil, nil, err
		}
		b.stats.ReadbackBytes += int64(4 * len(out))
		s.pos += T
		return nil, out, nil
	}
	logits, err = s.logitRows(T, all, last)
	if err != nil {
		return nil, nil, err
	}
	s.pos += T
	b.stats.Tokens += int64(T)
	return logits, nil, nil
}

// ExportState joins the parts' KV caches.
func (ss *splitSession) ExportState() (*backend.State, error) {
	st := &backend.State{Pos: ss.pos}
	for _, s := range ss.parts {
		p, err := s.ExportState()
		if err != nil {
			return nil, err
		}
		st.Layers = append(st.Layers, p.Layers...)
	}
	return st, nil
}

// ImportState hands each part its layers of a snapshot.
func (ss *splitSession) ImportState(st *backend.State) error {
	if st == nil || len(st.Layers) != len(ss.sp.arch.Layers) {
		return fmt.Errorf("cuda: state of the wrong shape for a %d-layer model", len(ss.sp.arch.Layers))
	}
	for _, s := range ss.parts {
		n := len(s.b.layers)
		part := &backend.State{Pos: st.Pos, Layers: st.Layers[s.b.from : s.b.from+n]}
		if err := s.ImportState(part); err != nil {
			return err
		}
	}
	ss.pos = st.Pos
	return nil
}

var (
	_ backend.Backend       = (*Split)(nil)
	_ backend.StatsReporter = (*Split)(nil)
	_ backend.Rewinder      = (*splitSession)(nil)
	_ backend.StateExporter = (*splitSession)(nil)
	_ backend.StateImporter = (*splitSession)(nil)
)

// SessionBytes is what one session of ctx positions holds on the device
// (per Backend, all layers): the KV cache, and the activations of one
// prefill chunk.
func SessionBytes(a *model.Arch, ctx int, kvF16 bool) backend.Memory {
	elem := int64(4)
	if kvF16 {
		elem = 2
	}
	chunk := int64(min(ctx, 2048))
	var m backend.Memory
	var qkv, ff int64
	for _, l := range a.Layers {
		if l.Attn == nil {
			continue
		}
		hd := max(l.Attn.HeadDim, minHeadDim)
		m.KV += 2 * int64(ctx) * int64(l.Attn.KVHeads*hd) * elem
		qkv = max(qkv, int64((l.Attn.Heads+2*l.Attn.KVHeads)*hd))
		ff = max(ff, int64(ffnWidth(l.FFNHidden)))
	}
	m.Activations = chunk*4*(4*int64(a.Hidden)+2*qkv+2*ff) + int64(min(int(chunk), maxLogitRows))*int64(a.Vocab)*4
	// The int8 copy of a prefill product's input (ck_quant_q8, for the
	// int8 GEMMs), as wide as the widest input.
	nq, nds := kernels.QuantBytes(int(chunk), int(max(int64(a.Hidden), qkv, ff)))
	m.Activations += int64(nq + nds)
	return m
}
