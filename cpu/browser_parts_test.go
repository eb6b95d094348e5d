package cpu

import (
	"testing"
	"time"

	"github.com/cortiq/cortiq/cpu/kernel"
	"github.com/cortiq/cortiq/model"
)

// BenchmarkBrowserParts says where BenchmarkBrowserDecode's time goes: it
// runs the same decode steps (the qwen-mini shape, one token at a time,
// after a 32-token prompt) as Forward does, part by part, and reports
// each part's milliseconds per token — the embedding, the norms, the
// q/k/v, output, gate/up and down products (in the kernel mode the
// engine uses), the attention between them (its softmax, rope and cache
// reads), the residual adds and checks, the activation, and the head.
// wasm has no profiler, so this is how the tab's CPU path is measured:
//
//	GOOS=js GOARCH=wasm go test -run XXX -bench BrowserParts ./cpu/   (with $(go env GOROOT)/lib/wasm on PATH)
//	GOMAXPROCS=1 go test -run XXX -bench BrowserParts ./cpu/ -browser.level generic
//
// "total" is the sum of the parts; compare it with BrowserDecode's tok/s.
func BenchmarkBrowserParts(b *testing.B) {
	forceBrowserLevel(b)
	dir := b.TempDir()
	for _, c := range browserCodecs {
		b.Run(c.String(), func(b *testing.B) {
			s := browserSession(b, dir, c, b.N+40)
			var p browserParts
			// Steps untimed, so that every buffer exists and wasm runs
			// optimized code (as BrowserDecode).
			for i := range 8 {
				if err := p.step(s, i+1); err != nil {
					b.Fatal(err)
				}
			}
			p = browserParts{}
			b.ResetTimer()
			c0 := cpuTime()
			for i := 0; i < b.N; i++ {
				if err := p.step(s, (i*7919)%browserShape.Vocab); err != nil {
					b.Fatal(err)
				}
			}
			c1 := cpuTime()
			b.StopTimer()
			if c1 > c0 {
				b.ReportMetric(float64((c1-c0).Microseconds())/1e3/float64(b.N), "cpu-ms/tok")
			}
			var total time.Duration
			for k, d := range p.d {
				total += d
				b.ReportMetric(float64(d.Microseconds())/1e3/float64(b.N), browserPartNames[k]+"-ms/tok")
			}
			b.ReportMetric(float64(total.Microseconds())/1e3/float64(b.N), "total-ms/tok")
		})
	}
}

const (
	partEmbed = iota
	partNorm
	partQKV
	partAttend // attention less its q/k/v and output products
	partO
	partResidual
	partGateUp
	partAct
	partDown
	partHead
	nParts
)

var browserPartNames = [nParts]string{"embed", "norm", "qkv", "attend", "o", "residual", "gateup", "act", "down", "head"}

type browserParts struct {
	d [nParts]time.Duration
	t time.Time
}

func (p *browserParts) start() { p.t = time.Now() }

func (p *browserParts) stop(k int) {
	now := time.Now()
	p.d[k] += now.Sub(p.t)
	p.t = now
}

// step is Session.Forward of one token for a dense attention model, in
// parts. The attention's products are timed apart from it (run once more
// on the same inputs) and subtracted.
func (p *browserParts) step(s *Session, tok int) error {
	b, a := s.b, s.b.arch
	H := a.Hidden
	p.start()
	x, err := s.embed([]int{tok})
	if err != nil {
		return err
	}
	p.stop(partEmbed)
	s.tmp.reset()
	h := s.tmp.get(H)
	mark := s.tmp.next
	for i, l := range b.layers {
		if l.spec.Mixer != model.MixerAttention || l.spec.FFN != model.FFNDense {
			panic("browserParts: a dense attention model only")
		}
		s.tmp.next = mark
		at := l.attn.spec
		p.start()
		s.norm(h, x, l.attnNorm, 1)
		p.stop(partNorm)
		t0 := time.Now()
		out := s.attention(i, l.attn, h, 1)
		// The attention's products again, on its inputs, timed apart and
		// taken off the attention's time.
		q := s.tmp.out(at.Heads * at.HeadDim)
		k := s.tmp.out(at.KVHeads * at.HeadDim)
		v := s.tmp.out(at.KVHeads * at.HeadDim)
		o := s.tmp.out(H)
		t1 := time.Now()
		kernel.MatMuls(h, 1, kernel.Product{Y: q, W: l.attn.q}, kernel.Product{Y: k, W: l.attn.k}, kernel.Product{Y: v, W: l.attn.v})
		t2 := time.Now()
		kernel.MatMul(o, l.attn.o, q, 1)
		t3 := time.Now()
		dqkv, do := t2.Sub(t1), t3.Sub(t2)
		p.d[partQKV] += dqkv
		p.d[partO] += do
		p.d[partAttend] += t1.Sub(t0) - dqkv - do
		p.t = t3
		s.residual(x, out, l.postAttnNorm, 1)
		if err := s.checkFinite(x, 1, i, "attention"); err != nil {
			return err
		}
		p.stop(partResidual)
		s.norm(h, x, l.ffnNorm, 1)
		p.stop(partNorm)
		ff := l.spec.FFNHidden
		g := s.tmp.out(ff)
		u := s.tmp.out(ff)
		kernel.MatMuls(h, 1, kernel.Product{Y: g, W: l.ffn.gate}, kernel.Product{Y: u, W: l.ffn.up})
		p.stop(partGateUp)
		gated(a, g, u)
		p.stop(partAct)
		out = s.tmp.out(H)
		kernel.MatMul(out, l.ffn.down, g, 1)
		p.stop(partDown)
		s.residual(x, out, l.postFFNNorm, 1)
		if err := s.checkFinite(x, 1, i, "FFN"); err != nil {
			return err
		}
		p.stop(partResidual)
	}
	s.consumed(s.pos + 1)
	s.norm(x, x, b.outNorm, 1)
	p.stop(partNorm)
	logits := make([]float32, a.Vocab)
	kernel.MatMul(logits, b.output, x, 1)
	if firstNonFinite(logits) >= 0 {
		return &NonFiniteError{Layer: len(b.layers), Part: "output projection", Pos: s.pos - 1}
	}
	p.stop(partHead)
	return nil
}
