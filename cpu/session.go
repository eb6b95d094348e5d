package cpu

import (
	"fmt"
	"math"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/cpu/kernel"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// Session is one sequence: its position and per-layer caches.
type Session struct {
	b      *Backend
	maxLen int
	pos    int
	caches []*kvCache // per layer; nil for non-attention layers
	conv   []ring     // per short-conv layer: the last Kernel-1 gated inputs
	delta  []*deltaState
	slots  int // recurrent states kept per layer (rewind depth + 1)
	lo     int // the lowest length whose recurrent state is still kept

	// hook, when set (tests), sees the residual stream after the embedding
	// (layer -1) and after every layer: n rows of Hidden values.
	hook func(layer int, x []float32, n int)

	tmp  scratch    // a layer's activations (attention, dense FFN)
	rope []ropeRows // this step's RoPE rows per table (ropeFor)
}

// scratch hands out zeroed float32 buffers that live until the next
// reset (one per layer): a forward pass allocates no activations in its
// steady state, so decode makes no garbage per token and prefill does
// not run the collector once per layer.
type scratch struct {
	bufs [][]float32
	next int
}

// get returns a zeroed buffer of n floats.
func (a *scratch) get(n int) []float32 {
	b := a.out(n)
	clear(b)
	return b
}

// out returns a buffer of n floats with stale contents, for a product's
// output (kernel.MatMul writes every element).
func (a *scratch) out(n int) []float32 {
	if a.next == len(a.bufs) {
		a.bufs = append(a.bufs, nil)
	}
	b := a.bufs[a.next]
	if cap(b) < n {
		b = make([]float32, n)
	} else {
		b = b[:n]
	}
	a.bufs[a.next] = b
	a.next++
	return b
}

// reset makes every buffer free for reuse.
func (a *scratch) reset() { a.next = 0 }

// trim drops the buffers when they hold more than max bytes (after a
// long prompt), so that an idle session keeps only a decode step's.
func (a *scratch) trim(max int) {
	n := 0
	for _, b := range a.bufs {
		n += 4 * cap(b)
	}
	if n > max {
		*a = scratch{}
	}
}

// kvCache holds the rotated keys and the values of past positions. A
// full-length cache holds every position and grows on demand (doubling, up
// to the session length), so that a session sized for a long context costs
// nothing until it is used. A sliding-window layer's cache is a ring of
// ring positions (the window plus the rewind depth): position p lives in
// row p % ring, and attention reads only the last window positions.
type kvCache struct {
	k, v     []float32 // [positions, width]; nil in half precision
	k16, v16 []uint16  // the same in half precision (Options.KVF16)
	width    int       // kvHeads*headDim
	limit    int       // the session length
	ring     int       // rows of a ring cache; 0 = one row per position
	f16      bool
}

// rows is the number of positions the cache has room for.
func (c *kvCache) rows() int {
	if c.f16 {
		return len(c.k16) / c.width
	}
	return len(c.k) / c.width
}

// put stores position p's key and value rows.
func (c *kvCache) put(p int, k, v []float32) {
	r := c.row(p)
	if !c.f16 {
		copy(c.k[r:r+c.width], k)
		copy(c.v[r:r+c.width], v)
		return
	}
	for i := range k {
		c.k16[r+i] = tensor.F32ToF16(k[i])
		c.v16[r+i] = tensor.F32ToF16(v[i])
	}
}

// get reads n floats of position p's key and value rows from offset off,
// decoding half precision into kbuf and vbuf (n long).
func (c *kvCache) get(p, off, n int, kbuf, vbuf []float32) (k, v []float32) {
	r := c.row(p) + off
	if !c.f16 {
		return c.k[r : r+n], c.v[r : r+n]
	}
	for i := range n {
		kbuf[i] = tensor.F16ToF32(c.k16[r+i])
		vbuf[i] = tensor.F16ToF32(c.v16[r+i])
	}
	return kbuf[:n], vbuf[:n]
}

// bytes is the memory the cache holds.
func (c *kvCache) bytes() int64 {
	return int64(4*(len(c.k)+len(c.v)) + 2*(len(c.k16)+len(c.v16)))
}

// ensure makes room for positions [0, n).
func (c *kvCache) ensure(n int) {
	if c.ring > 0 {
		n = c.ring
	}
	if n <= c.rows() {
		return
	}
	size := max(n, min(c.limit, max(256, 2*c.rows())))
	if c.ring > 0 {
		size = c.ring
	}
	if c.f16 {
		k := make([]uint16, size*c.width)
		v := make([]uint16, size*c.width)
		copy(k, c.k16)
		copy(v, c.v16)
		c.k16, c.v16 = k, v
		return
	}
	k := make([]float32, size*c.width)
	v := make([]float32, size*c.width)
	copy(k, c.k)
	copy(v, c.v)
	c.k, c.v = k, v
}

// row is the offset of position p's row.
func (c *kvCache) row(p int) int {
	if c.ring > 0 {
		p %= c.ring
	}
	return p * c.width
}

// kept is the first position whose row a cache holding positions [0, n)
// still has.
func (c *kvCache) kept(n int) int {
	if c.ring > 0 {
		return max(0, n-c.ring)
	}
	return 0
}

// RingLen is the number of positions a sliding-window layer's KV ring
// holds in a session of maxLen positions that can rewind depth of them:
// the window, plus depth so a rewind finds the window before its new end
// intact, and at least ringPiece more; 0 (a full-length cache) when that
// is not shorter than maxLen. The CPU computes a step's attention in
// pieces of ring-window+1 tokens, so no piece overwrites a row a query of
// the piece still reads.
func RingLen(window, depth, maxLen int) int {
	if window <= 0 {
		return 0
	}
	r := window + max(depth, ringPiece, 1)
	if r >= maxLen {
		return 0
	}
	return r
}

// ringPiece is the least number of tokens a step's attention piece takes
// over a ring (a long prompt runs in pieces of at least this); tests make
// it small so short sequences wrap the ring many times.
var ringPiece = 64

func (b *Backend) newSession(maxLen int) (*Session, error) {
	if maxLen <= 0 {
		return nil, fmt.Errorf("cpu: session length %d", maxLen)
	}
	L := len(b.layers)
	s := &Session{b: b, maxLen: maxLen, caches: make([]*kvCache, L), conv: make([]ring, L), delta: make([]*deltaState, L)}
	s.slots = b.opts.RewindDepth + 1
	if b.opts.RewindDepth <= 0 {
		s.slots = backend.DefaultRewindDepth + 1
	}
	for i, l := range b.layers {
		if l.delta != nil {
			s.delta[i] = newDeltaState(l.delta, s.slots)
		}
		if l.conv != nil {
			s.conv[i] = newRing(s.slots, (l.conv.spec.Kernel-1)*b.arch.Hidden)
		}
		if l.attn != nil {
			at := l.attn.spec
			kv := at.KVHeads * at.HeadDim
			if int64(maxLen)*int64(kv) > 1<<34 {
				return nil, fmt.Errorf("cpu: session of %d positions is too large", maxLen)
			}
			s.caches[i] = &kvCache{width: kv, limit: maxLen, f16: b.opts.KVF16}
			if !b.opts.FullKV {
				s.caches[i].ring = RingLen(at.Window, s.slots-1, maxLen)
			}
		}
	}
	return s, nil
}

// Len is the number of positions consumed.
func (s *Session) Len() int { return s.pos }

// Reset forgets every position; the caches are reused.
func (s *Session) Reset() {
	s.pos = 0
	s.lo = 0
	for _, c := range s.conv {
		c.reset()
	}
	for _, d := range s.delta {
		if d != nil {
			d.reset()
		}
	}
}

// Close drops the caches.
func (s *Session) Close() error {
	s.caches = nil
	return nil
}

var _ backend.Session = (*Session)(nil)

// Forward runs tokens through the model at positions Len()...; it returns the
// logits of the last token, or of every token when all is true.
func (s *Session) Forward(tokens []int, all bool) ([]float32, error) {
	b, a := s.b, s.b.arch
	n := len(tokens)
	if n == 0 {
		return nil, fmt.Errorf("cpu: forward of no tokens")
	}
	if s.caches == nil {
		return nil, fmt.Errorf("cpu: session is closed")
	}
	if s.pos+n > s.maxLen {
		return nil, fmt.Errorf("cpu: %d positions + %d tokens exceed the session length %d", s.pos, n, s.maxLen)
	}
	H := a.Hidden

	x, err := s.embed(tokens)
	if err != nil {
		return nil, err
	}
	if err := s.checkFinite(x, n, -1, "token embedding"); err != nil {
		return nil, err
	}

	if err := s.runLayers(x, n, 0, len(b.layers)); err != nil {
		return nil, err
	}
	s.consumed(s.pos + n)

	// Final norm and logits, for the rows the caller wants.
	rows := x
	if !all {
		rows = x[(n-1)*H:]
		n = 1
	}
	s.norm(rows, rows, b.outNorm, n)
	if s.hook != nil {
		s.hook(len(b.layers), rows, n)
	}
	logits := make([]float32, n*a.Vocab)
	kernel.MatMul(logits, b.output, rows, n)
	if sc := a.Scales().Logit; sc != 1 {
		kernel.Scale(logits, sc)
	}
	if c := a.FinalSoftcap; c > 0 {
		for i, v := range logits {
			logits[i] = float32(math.Tanh(float64(v/c))) * c
		}
	}
	if i := firstNonFinite(logits); i >= 0 {
		// The final norm's input was finite (checked after the last
		// layer): the output norm or the output matrix broke it.
		part := "output norm"
		if firstNonFinite(rows) < 0 {
			part = "output projection"
		}
		return nil, &NonFiniteError{Layer: len(b.layers), Part: part, Pos: s.pos - n + i/a.Vocab}
	}
	return logits, nil
}

// NonFiniteError reports the first place a forward pass produced a NaN or
// an infinity: a layer's mixer or FFN output (Layer 0...), the token
// embedding (Layer -1), or the output norm or projection (Layer = the
// number of layers). A model whose numbers are sound never produces one, so
// it points at broken weights or metadata; the logits are not returned
// (greedy decoding would otherwise pick token 0 forever). The session must
// not be used after a Forward that returned it.
type NonFiniteError struct {
	Layer int
	Part  string // "token embedding", "attention", "short_conv", "gated_delta", "FFN", "output norm", "output projection", "device input"
	Pos   int    // the first position whose values are not finite
}

func (e *NonFiniteError) Error() string {
	var where string
	switch e.Part {
	case "token embedding", "output norm", "output projection":
		where = "the " + e.Part
	case "device input":
		where = fmt.Sprintf("the hidden state the device passed to layer %d", e.Layer)
	default:
		where = fmt.Sprintf("layer %d's %s output", e.Layer, e.Part)
	}
	return fmt.Sprintf("cpu: non-finite values (NaN or infinity) first appear in %s, at position %d: the model's weights or numbers are broken", where, e.Pos)
}

// firstNonFinite returns the index of x's first NaN or infinity, or -1. It
// tests the exponent bits (kernel.AllFinite first, in SIMD), so it costs
// about as much as a copy.
func firstNonFinite(x []float32) int {
	if kernel.AllFinite(x) {
		return -1
	}
	for i, v := range x {
		if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
			return i
		}
	}
	return -1
}

// checkFinite returns a *NonFiniteError when the n rows of x (positions
// s.pos...) hold a NaN or infinity after the given layer's part.
func (s *Session) checkFinite(x []float32, n, layer int, part string) error {
	i := firstNonFinite(x[:n*s.b.arch.Hidden])
	if i < 0 {
		return nil
	}
	return &NonFiniteError{Layer: layer, Part: part, Pos: s.pos + i/s.b.arch.Hidden}
}

// embed returns the embedding rows [len(tokens), hidden] as layer 0 sees
// them (the embedding scale applied).
func (s *Session) embed(tokens []int) ([]float32, error) {
	b, a := s.b, s.b.arch
	H := a.Hidden
	x := make([]float32, len(tokens)*H)
	for t, tok := range tokens {
		if tok < 0 || tok >= a.Vocab {
			return nil, fmt.Errorf("cpu: token %d outside the vocabulary of %d", tok, a.Vocab)
		}
		row := x[t*H : (t+1)*H]
		if err := tensor.DecodeRows(row, b.embd, tok, 1); err != nil {
			return nil, fmt.Errorf("cpu: embedding: %w", err)
		}
		if sc := a.Scales().Embed; sc != 1 {
			kernel.Scale(row, sc)
		}
	}
	if s.hook != nil {
		s.hook(-1, x, len(tokens))
	}
	return x, nil
}

// HiddenStates runs tokens (positions 0..n-1) through the embedding and the
// first k decoder layers and returns the residual stream [n, hidden]
// entering layer k: transformers' output_hidden_states[k] (k = 0 the
// embeddings; k = layers the last layer's output before the final norm,
// which transformers' hidden_states[-1] has applied). A text encoder taking
// hidden_states[-2] asks for k = layers-1. Attention is causal, as in
// Forward.
func (b *Backend) HiddenStates(tokens []int, k int) ([]float32, error) {
	if k < 0 || k > len(b.layers) {
		return nil, fmt.Errorf("cpu: hidden states after %d layers of a %d-layer model", k, len(b.layers))
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("cpu: hidden states of no tokens")
	}
	s, err := b.newSession(len(tokens))
	if err != nil {
		return nil, err
	}
	defer s.Close()
	x, err := s.embed(tokens)
	if err != nil {
		return nil, err
	}
	if err := s.runLayers(x, len(tokens), 0, k); err != nil {
		return nil, err
	}
	return x, nil
}

// norm writes the RMS-normalized rows of x into dst, or copies them when the
// layer has no such norm.
func (s *Session) norm(dst, x, w []float32, n int) {
	if w == nil {
		copy(dst, x)
		return
	}
	a := s.b.arch
	H := a.Hidden
	if n == 1 {
		kernel.RMSNorm(dst[:H], x[:H], w, a.NormEps, a.Norm == model.NormRMSPlusOne)
		return
	}
	kernel.ParallelFor(n, 4, func(lo, hi int) { // rows in fours: RMSNormRows
		kernel.RMSNormRows(dst[lo*H:hi*H], x[lo*H:hi*H], w, H, a.NormEps, a.Norm == model.NormRMSPlusOne)
	})
}

// residual adds a branch output (optionally post-normed, then scaled) to x.
func (s *Session) residual(x, out, postNorm []float32, n int) {
	a := s.b.arch
	if postNorm != nil {
		s.norm(out, out, postNorm, n)
	}
	if n == 1 {
		addScaled(x, out, a.Scales().Residual)
		return
	}
	H := a.Hidden
	parallelTokens(n, func(lo, hi int) { addScaled(x[lo*H:hi*H], out[lo*H:hi*H], a.Scales().Residual) })
}

// addScaled adds sc·out to x.
func addScaled(x, out []float32, sc float32) {
	if sc != 1 {
		kernel.Axpy(x, sc, out)
		return
	}
	kernel.Add(x, out)
}

// denseFFN is down(act(gate(h)) * up(h)).
func (s *Session) denseFFN(f *ffnWeights, h []float32, n, ff int) []float32 {
	a := s.b.arch
	g := s.tmp.out(n * ff)
	u := s.tmp.out(n * ff)
	kernel.MatMuls(h, n, kernel.Product{Y: g, W: f.gate}, kernel.Product{Y: u, W: f.up})
	if n == 1 {
		gated(a, g, u)
	} else {
		parallelTokens(n, func(lo, hi int) { gated(a, g[lo*ff:hi*ff], u[lo*ff:hi*ff]) })
	}
	out := s.tmp.out(n * a.Hidden)
	kernel.MatMul(out, f.down, g, n)
	return out
}

// gated replaces g by the gated activation of (g, u): act(g)*u, or
// gpt-oss's clamped SwiGLU.
func gated(a *model.Arch, g, u []float32) {
	if a.Act == model.ActSwiGLUOAI {
		lim, alpha := a.SwiGLULimit, a.SwiGLUAlpha
		for i, x := range g {
			x = min(x, lim)
			y := min(max(u[i], -lim), lim)
			glu := x * float32(1/(1+math.Exp(-float64(x*alpha))))
			g[i] = (y + 1) * glu
		}
		return
	}
	activate(a.Act, g)
	kernel.Mul(g, u)
}

func activate(act model.Activation, x []float32) {
	switch act {
	case model.ActGELUTanh:
		kernel.GELUTanh(x)
	default:
		kernel.SiLU(x)
	}
}

// runLayers runs decoder layers [from, to) over the n hidden rows in x (in
// place) at positions s.pos.. . The residual stream is checked after each
// mixer and FFN (a scan of n·Hidden values, next to the layer's n·Hidden²
// multiply-adds): the first non-finite value stops the pass with a
// *NonFiniteError naming the layer.
func (s *Session) runLayers(x []float32, n, from, to int) error {
	b := s.b
	defer func() {
		s.tmp.reset()
		s.tmp.trim(64 << 20)
		if n > 4096 {
			s.rope = nil // a long prompt's rows: decode needs one
		}
	}()
	s.tmp.reset()
	s.rope = s.rope[:0]
	h := s.tmp.get(n * b.arch.Hidden)
	mark := s.tmp.next
	for i := from; i < to; i++ {
		l := b.layers[i]
		s.tmp.next = mark // the last layer's activations are dead
		// Token mixer with its residual.
		s.norm(h, x, l.attnNorm, n)
		var out []float32
		switch l.spec.Mixer {
		case model.MixerAttention:
			out = s.attention(i, l.attn, h, n)
		case model.MixerShortConv:
			out = s.shortConv(l.conv, s.conv[i], h, n)
		case model.MixerGatedDelta:
			out = s.gatedDelta(l.delta, s.delta[i], h, n)
		}
		s.residual(x, out, l.postAttnNorm, n)
		if err := s.checkFinite(x, n, i, string(l.spec.Mixer)); err != nil {
			return err
		}

		// Feed-forward with its residual.
		s.norm(h, x, l.ffnNorm, n)
		switch l.spec.FFN {
		case model.FFNDense:
			out = s.denseFFN(l.ffn, h, n, l.spec.FFNHidden)
		case model.FFNMoE:
			out = s.moeFFN(l.moe, h, n)
		}
		s.residual(x, out, l.postFFNNorm, n)
		if s.hook != nil {
			s.hook(i, x, n)
		}
		if err := s.checkFinite(x, n, i, "FFN"); err != nil {
			return err
		}
	}
	return nil
}

// ForwardLayers runs decoder layers [from, to) over n hidden rows x (in
// place) at positions pos0..pos0+n-1, keeping this session's caches for
// those layers: the backend.LayerRunner the scheduler (package engine)
// runs the layers of a split model that are off the device with. For
// each layer, calls must come in position order, as Forward's do.
func (s *Session) ForwardLayers(x []float32, n, pos0, from, to int) error {
	if s.caches == nil {
		return fmt.Errorf("cpu: session is closed")
	}
	if from < 0 || to > len(s.b.layers) || from > to || len(x) != n*s.b.arch.Hidden {
		return fmt.Errorf("cpu: ForwardLayers(%d rows, layers %d..%d) of a %d-layer model", n, from, to, len(s.b.layers))
	}
	// Several disjoint layer ranges may run at the same positions (the
	// device runs the layers between them), so the position is per call;
	// each layer's cache only ever grows in order because the device
	// session calls in position order.
	if pos0 < 0 || pos0 > s.pos || pos0+n > s.maxLen {
		return fmt.Errorf("cpu: ForwardLayers at positions %d..%d, the session holds %d of %d", pos0, pos0+n-1, s.pos, s.maxLen)
	}
	end := max(s.pos, pos0+n)
	s.pos = pos0
	// Rows that arrive broken (from the device's layers) are not blamed on
	// this session's first layer.
	if err := s.checkFinite(x, n, from, "device input"); err != nil {
		s.pos = end
		return err
	}
	if err := s.runLayers(x, n, from, to); err != nil {
		s.pos = end
		return err
	}
	s.pos = pos0
	s.consumed(end)
	return nil
}

// ResidentBytes is the memory the session's caches hold now: KV entries
// (grown on demand, or a sliding-window layer's ring) and the recurrent
// states kept per step.
func (s *Session) ResidentBytes() int64 {
	var n int64
	for i, c := range s.caches {
		if c != nil {
			n += c.bytes()
		}
		if r := s.conv[i]; r != nil {
			n += int64(4 * len(r) * len(r[0]))
		}
		if d := s.delta[i]; d != nil {
			n += int64(4 * len(d.conv) * len(d.conv[0]))
			n += int64(4 * len(d.s) * len(d.s[0]))
		}
	}
	return n
}
