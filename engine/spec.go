package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/sample"
)

// Speculative decoding: a drafter proposes up to K tokens; the target
// consumes the last emitted token and the drafts in ONE batched step
// (Forward with all: one pass on the CPU, one submit on the device) and
// keeps the longest prefix the acceptance rule allows, then one more token
// (the correction, or the bonus after a full acceptance); the rejected
// tail is rewound (backend.Rewinder). Greedy output is the plain greedy
// one; with sampling, the standard rule (accept a draft d with probability
// min(1, p(d)/q(d)), else draw from norm(max(0, p−q))) keeps the output
// distribution that of plain sampling.
//
// Greedy verification without penalties needs only each position's
// argmax: the device takes it (backend.GreedyVerifier) and sends back k+1
// ids, and a draft model drafts with its own on-device greedy steps (one
// submit for all k drafts). Unless Spec.Always, a governor (specgov.go)
// measures speculative against plain steps as the generation runs and
// pauses drafting while speculation is the slower, within a bounded loss.
// A draft model reads the prompt during the prefill and, after a pause,
// catches up on the tokens decoded plainly in one batched Forward when
// the next probe starts (the governor counts that catch-up's cost).

// Spec configures speculative decoding for a request.
type Spec struct {
	// Mode is "ngram" (prompt lookup: the tokens that followed the latest
	// earlier occurrence of the context's last n-gram) or "draft" (Draft
	// proposes them).
	Mode string
	// K is the most tokens drafted per step (0 = 4). The sessions keep
	// the recurrent state of K steps (Options.RewindDepth) to rewind them.
	K int
	// Draft is the draft model of mode "draft": its vocabulary must be
	// the target's (CheckDraft).
	Draft *Engine
	// NgramMax is the longest n-gram mode "ngram" matches (0 = 3).
	NgramMax int
	// DraftSampling, when set, is how the draft model samples its
	// proposals (the request's sampling otherwise). Any draft distribution
	// keeps the output distribution; one closer to the target's is
	// accepted more often. Greedy requests draft greedily regardless.
	DraftSampling *sample.Params
	// Always speculates at every step. Otherwise the generation measures
	// the time per token of speculative and of plain steps as it goes and
	// pauses drafting while speculation is the slower (SpecStats.Paused,
	// DisabledReason); what speculation may lose against plain decoding
	// is bounded by a budget (a few plain steps plus 5% of the tokens
	// emitted, specgov.go), so a draft that is never accepted costs
	// little more than that.
	Always bool

	// tune adjusts the governor (tests: its clock and windows).
	tune func(*specGovernor)
	// drafter, when set, proposes instead of n-gram lookup in mode
	// "ngram" (tests: a drafter that is never accepted).
	drafter func(history []int, k int) []int
}

// SpecStats reports what speculation did in a generation.
type SpecStats struct {
	Mode     string  `json:"mode"`
	K        int     `json:"k"`
	Steps    int     `json:"steps"`    // batched verify steps
	Drafted  int     `json:"drafted"`  // tokens proposed
	Accepted int     `json:"accepted"` // of them kept
	Rate     float64 `json:"acceptance_rate"`
	// TokensPerStep is the tokens emitted per target step (verify steps
	// and plain steps alike).
	TokensPerStep float64 `json:"tokens_per_step"`
	// EffectiveTokS is the decode rate with speculation (Result.DecodeTokS).
	EffectiveTokS float64 `json:"effective_tok_s"`
	// SpecTokS and PlainTokS are the governor's last measurements of the
	// decode rate of speculative and of plain steps (0: not measured;
	// none with Spec.Always).
	SpecTokS  float64 `json:"spec_tok_s,omitempty"`
	PlainTokS float64 `json:"plain_tok_s,omitempty"`
	// SubmitsPerToken and ReadbackPerToken are the device submits and
	// bytes read back per emitted token over the decode, the target's and
	// a draft's (another engine's device) together.
	SubmitsPerToken  float64 `json:"submits_per_token,omitempty"`
	ReadbackPerToken float64 `json:"readback_bytes_per_token,omitempty"`
	// PlainTokens are the tokens decoded plainly (probes and pauses).
	PlainTokens int `json:"plain_tokens,omitempty"`
	// Paused counts the times speculation measured slower than plain
	// decoding and drafting paused; DisabledReason is the last such
	// measurement.
	Paused         int    `json:"paused,omitempty"`
	DisabledReason string `json:"disabled_reason,omitempty"`
	targetSteps    int
}

// SetSpec makes sp the speculation of every request that sets none (nil:
// none), after checking a draft's vocabulary. Not safe to call while
// generations run.
func (e *Engine) SetSpec(sp *Spec) error {
	if sp != nil {
		switch sp.Mode {
		case "ngram":
		case "draft":
			if sp.Draft == nil {
				return errors.New("engine: speculative mode draft without a draft model")
			}
			if err := CheckDraft(e, sp.Draft); err != nil {
				return err
			}
		default:
			return fmt.Errorf("engine: unknown speculative mode %q (ngram or draft)", sp.Mode)
		}
	}
	e.spec = sp
	return nil
}

// DefaultSpecK is Spec.K's default.
const DefaultSpecK = 4

// openK is the most tokens drafted by a speculative probe's first call.
const openK = 1

// CheckDraft reports whether draft can propose tokens for target: the same
// tokenizer (every token's text, BOS and EOS), or without tokenizers the
// same number of logits.
func CheckDraft(target, draft *Engine) error {
	tv, dv := target.Model.Arch.Vocab, draft.Model.Arch.Vocab
	tt, dt := target.Tokenizer, draft.Tokenizer
	if tt == nil || dt == nil {
		if tt != nil || dt != nil {
			return errors.New("engine: draft model: one of the two models carries no tokenizer, so their vocabularies cannot be compared")
		}
		if tv != dv {
			return fmt.Errorf("engine: draft model has %d logits, the target %d: not the same vocabulary", dv, tv)
		}
		return nil
	}
	if tt.VocabSize() != dt.VocabSize() {
		return fmt.Errorf("engine: draft model's vocabulary has %d tokens, the target's %d", dt.VocabSize(), tt.VocabSize())
	}
	for id := range tt.VocabSize() {
		if a, b := tt.Token(id), dt.Token(id); a != b {
			return fmt.Errorf("engine: draft model's token %d is %q, the target's %q: not the same vocabulary", id, b, a)
		}
	}
	if tt.BOS() != dt.BOS() || tt.EOS() != dt.EOS() {
		return fmt.Errorf("engine: draft model's BOS/EOS %d/%d, the target's %d/%d", dt.BOS(), dt.EOS(), tt.BOS(), tt.EOS())
	}
	if tt.VocabSize() > min(tv, dv) {
		return fmt.Errorf("engine: the tokenizer's %d tokens exceed the logits (%d target, %d draft)", tt.VocabSize(), tv, dv)
	}
	return nil
}

// speculator runs the speculative steps of one generation.
type speculator struct {
	spec Spec
	k    int
	// cur is the draft length of the next step: it grows by one after a
	// step whose drafts were all accepted and halves after one whose
	// drafts were all rejected, so a drafter that keeps missing costs
	// little verification.
	cur    int
	target *session
	smp    *sample.Sampler // the target's sampler (the generation's)
	params sample.Params
	stats  SpecStats

	// Mode "draft": the draft's session, its sampler, and how many of the
	// generation's tokens it has consumed.
	draft    *session
	dsmp     *sample.Sampler
	draftLen int
	// draftConsumed is how many of the step's drafts the draft session
	// consumed: all of them when it drafted with on-device greedy steps
	// (one more step than drafts, so the next step starts from the one
	// token the target emits), all but the last otherwise.
	draftConsumed int

	// submits0 and readback0 are the devices' counters at the start.
	submits0, readback0 int64

	// dry counts the steps in a row without drafts.
	dry int

	// gov decides step by step whether to speculate (nil: always).
	gov *specGovernor

	// argmaxOnly: greedy without penalties, so verification needs only
	// each position's argmax (session.VerifyGreedy: ids, not logits, come
	// back from the device) and the draft drafts with ForwardGreedy.
	argmaxOnly bool
}

// argmaxOnly reports whether p picks the argmax of the raw logits: greedy
// without penalties.
func argmaxOnly(p sample.Params) bool {
	return p.Greedy() && (p.RepeatPenalty == 0 || p.RepeatPenalty == 1) && p.PresencePenalty == 0 && p.FrequencyPenalty == 0
}

func (e *Engine) newSpeculator(spec Spec, target *session, smp *sample.Sampler, p sample.Params, maxCtx int, backendName string) (*speculator, error) {
	k := spec.K
	if k <= 0 {
		k = DefaultSpecK
	}
	// A model with recurrent layers or KV rings rewinds at most its
	// rewind depth without a replay: the target up to k, the draft up to
	// k-1.
	if d, ok := e.recurrentDepth(); ok {
		k = min(k, d)
	}
	// The draft rewinds up to k (it consumes every draft when drafting
	// greedily on the device), else k-1.
	fast := argmaxOnly(p)
	if spec.Draft != nil {
		if d, ok := spec.Draft.recurrentDepth(); ok {
			if fast {
				k = min(k, d)
			} else {
				k = min(k, d+1)
			}
		}
	}
	sp := &speculator{spec: spec, k: k, cur: k, target: target, smp: smp, params: p, argmaxOnly: fast, stats: SpecStats{Mode: spec.Mode, K: k}}
	// Verify steps of up to k+1 tokens: their kernels are built now, not
	// inside the decode (where the governor would time the compiles).
	if v, ok := target.cur.(backend.VerifyPreparer); ok && target.onDevice {
		_ = v.PrepareVerify(k + 1)
	}
	if !spec.Always {
		sp.gov = newSpecGovernor(nil)
		if spec.tune != nil {
			spec.tune(sp.gov)
		}
	}
	switch spec.Mode {
	case "ngram":
		if spec.NgramMax <= 0 {
			sp.spec.NgramMax = 3
		}
	case "draft":
		if spec.Draft == nil {
			return nil, errors.New("engine: speculative mode draft without a draft model")
		}
		if err := CheckDraft(e, spec.Draft); err != nil {
			return nil, err
		}
		ds, err := spec.Draft.newSession(maxCtx, backendName)
		if err != nil {
			return nil, fmt.Errorf("engine: draft model: %w", err)
		}
		sp.draft = ds
		dp := p
		if spec.DraftSampling != nil {
			dp = *spec.DraftSampling
		}
		if p.Greedy() {
			dp = p
		}
		dp.Seed = p.Seed ^ 0xD1B54A32D192ED03
		sp.dsmp = sample.New(dp)
	default:
		return nil, fmt.Errorf("engine: unknown speculative mode %q (ngram or draft)", spec.Mode)
	}
	return sp, nil
}

// recurrentDepth is the sessions' rewind depth when the model has
// recurrent layers (short conv, DeltaNet) or sliding-window layers (their
// KV rings keep the window plus the depth); ok is false without them.
func (e *Engine) recurrentDepth() (depth int, ok bool) {
	for _, l := range e.Model.Arch.Layers {
		if l.Conv != nil || l.Delta != nil || (l.Attn != nil && l.Attn.Window > 0) {
			if depth = e.opts.RewindDepth; depth <= 0 {
				depth = backend.DefaultRewindDepth
			}
			return depth, true
		}
	}
	return 0, false
}

// devCounters sums the submits and readback bytes of the target's device
// and the draft's (when the draft is another engine).
func (sp *speculator) devCounters() (submits, readback int64) {
	submits, _ = sp.target.counters()
	readback = sp.target.readback()
	if d := sp.draft; d != nil && d.e != sp.target.e {
		s, _ := d.counters()
		submits += s
		readback += d.readback()
	}
	return submits, readback
}

// speculate reports whether the next decode call speculates.
func (sp *speculator) speculate() bool { return sp.gov == nil || sp.gov.speculate() }

// finish fills the statistics only the generation's end knows.
func (sp *speculator) finish(emitted int, decodeTokS float64) *SpecStats {
	st := sp.stats
	if st.Drafted > 0 {
		st.Rate = float64(st.Accepted) / float64(st.Drafted)
	}
	if st.targetSteps > 0 {
		st.TokensPerStep = float64(emitted-st.PlainTokens) / float64(st.targetSteps)
	}
	st.EffectiveTokS = decodeTokS
	if sub, rb := sp.devCounters(); emitted > 0 {
		st.SubmitsPerToken = float64(sub-sp.submits0) / float64(emitted)
		st.ReadbackPerToken = float64(rb-sp.readback0) / float64(emitted)
	}
	if g := sp.gov; g != nil {
		st.PlainTokS, st.SpecTokS = tokS(g.cost[0]), tokS(g.cost[1])
		st.Paused, st.DisabledReason = g.paused, g.reason
	}
	return &st
}

// prefill makes the draft consume the prompt but its last token (which
// the first speculative step feeds it with the tokens after it).
func (sp *speculator) prefill(prompt []int) error {
	ds := sp.draft
	if ds == nil || len(prompt) < 2 || sp.draftLen != 0 || len(ds.history) != 0 {
		return nil
	}
	var t0 time.Time
	if sp.gov != nil {
		t0 = sp.gov.now()
	}
	if _, err := ds.Forward(prompt[:len(prompt)-1], false); err != nil {
		return fmt.Errorf("engine: draft model: %w", err)
	}
	if sp.gov != nil {
		sp.gov.primed(len(prompt)-1, sp.gov.now().Sub(t0))
	}
	sp.draftLen = len(prompt) - 1
	return nil
}

func (sp *speculator) close() {
	if sp.draft != nil {
		sp.draft.Close()
	}
}

// step emits the next tokens after history, whose last token (last) the
// target has not consumed yet; at most limit tokens. It returns them; all
// but the last are consumed by the target.
func (sp *speculator) step(history []int, limit int) ([]int, error) {
	t := sp.target
	last := history[len(history)-1]
	k := min(sp.cur, limit-1, t.maxLen-len(t.history)-1)
	if sp.gov != nil && sp.gov.opening() {
		// A probe's first call is not measured (it carries the switch)
		// and may be the one the budget cannot cover: a short one.
		k = min(k, openK)
	}
	var drafts []int
	var qs []sample.Dist
	if k > 0 {
		var err error
		if drafts, qs, err = sp.propose(history, k); err != nil {
			return nil, err
		}
	}
	sp.stats.targetSteps++
	if sp.gov != nil {
		sp.gov.curDry = len(drafts) == 0
	}
	if sp.draft != nil && len(drafts) == 0 {
		sp.draftLen = len(sp.draft.history)
	}
	if len(drafts) == 0 {
		sp.dry++
		if sp.argmaxOnly {
			// Lookup that found nothing twice in a row will likely find
			// nothing next time either: the next greedy step is submitted
			// now, so the device runs it while the host looks up (a step
			// that drafts after all drops it).
			next := 0
			if sp.draft == nil && sp.dry >= 2 && limit >= 2 {
				next = 1
			}
			return t.ForwardGreedy(last, 1, next)
		}
		logits, err := t.Forward([]int{last}, false)
		if err != nil {
			return nil, err
		}
		return []int{sp.smp.Sample(logits, history)}, nil
	}
	sp.dry = 0
	sp.stats.Steps++
	sp.stats.Drafted += len(drafts)
	var out []int
	if sp.argmaxOnly {
		// The target's picks after last and after each draft: the drafts
		// up to the first that differs from its pick, then that pick (or
		// the bonus pick after all of them).
		picks, err := t.VerifyGreedy(append([]int{last}, drafts...))
		if err != nil {
			return nil, err
		}
		a := 0
		for a < len(drafts) && picks[a] == drafts[a] {
			a++
		}
		out = append(drafts[:a:a], picks[a])
		sp.stats.Accepted += a
		return out, sp.settle(history, drafts, out)
	}
	rows, err := t.Forward(append([]int{last}, drafts...), true)
	if err != nil {
		return nil, err
	}
	vocab := len(rows) / (len(drafts) + 1)
	ctx := append([]int(nil), history...)
	for i := 0; i <= len(drafts); i++ {
		row := rows[i*vocab : (i+1)*vocab]
		if i == len(drafts) {
			// Every draft accepted: the bonus token from the last row.
			out = append(out, sp.smp.Sample(row, ctx))
			break
		}
		d := drafts[i]
		if sp.params.Greedy() {
			// p is one-hot at the argmax: accept d exactly when it is the
			// argmax, else the argmax is the correction.
			sample.Penalize(row, ctx, sp.params)
			if a := sample.Argmax(row); a != d {
				out = append(out, a)
				break
			}
		} else {
			p := sp.smp.Dist(row, ctx)
			pd, qd := p.Prob(d), qs[i].Prob(d)
			if qd <= 0 || sp.smp.Uniform()*qd >= pd {
				out = append(out, sp.smp.Draw(residual(p, qs[i])))
				break
			}
		}
		out = append(out, d)
		ctx = append(ctx, d)
		sp.stats.Accepted++
	}
	return out, sp.settle(history, drafts, out)
}

// settle adapts the draft length to the step's acceptance and rewinds
// what the target and the draft consumed of the rejected drafts.
func (sp *speculator) settle(history, drafts, out []int) error {
	t := sp.target
	switch accepted := len(out) - 1; accepted {
	case len(drafts):
		sp.cur = min(sp.k, sp.cur+1)
	case 0:
		sp.cur = max(1, sp.cur/2)
	}
	// The target consumed last and every draft; it keeps last and the
	// accepted ones (all of out but its final token).
	if n := len(drafts) - (len(out) - 1); n > 0 {
		if err := t.rewind(n); err != nil {
			return err
		}
	}
	if sp.draft != nil {
		// The draft consumed the context (all but its last token was its
		// own) and draftConsumed of the drafts; it keeps what was
		// accepted of those.
		keep := min(len(out)-1, sp.draftConsumed)
		if n := sp.draftConsumed - keep; n > 0 {
			if err := sp.draft.rewind(n); err != nil {
				return err
			}
		}
		sp.draftLen = len(history) + keep
	}
	return nil
}

// residual is norm(max(0, p−q)) over p's support (p itself when q covers
// it entirely, which happens only where p = q and a rejection has
// probability zero).
func residual(p, q sample.Dist) sample.Dist {
	r := sample.Dist{}
	for i, id := range p.IDs {
		if v := p.P[i] - q.Prob(id); v > 0 {
			r.IDs = append(r.IDs, id)
			r.P = append(r.P, v)
		}
	}
	if len(r.IDs) == 0 {
		return p
	}
	return r
}

// propose drafts up to k tokens after history, with the distributions they
// were drawn from (one-hot for n-gram lookup).
func (sp *speculator) propose(history []int, k int) ([]int, []sample.Dist, error) {
	if sp.draft == nil {
		var d []int
		if sp.spec.drafter != nil {
			d = sp.spec.drafter(history, k)
		} else {
			d = ngramDraft(history, sp.spec.NgramMax, k)
		}
		qs := make([]sample.Dist, len(d))
		for i, id := range d {
			qs[i] = sample.Dist{IDs: []int{id}, P: []float64{1}}
		}
		return d, qs, nil
	}
	ds := sp.draft
	if len(ds.history) != sp.draftLen || sp.draftLen >= len(history) {
		return nil, nil, fmt.Errorf("engine: draft session at %d positions, expected %d", len(ds.history), sp.draftLen)
	}
	if sp.argmaxOnly {
		return sp.proposeGreedy(history, k)
	}
	sp.draftConsumed = k - 1
	logits, err := sp.catchUp(history[sp.draftLen:], 1)
	if err != nil {
		return nil, nil, err
	}
	ctx := append([]int(nil), history...)
	var drafts []int
	var qs []sample.Dist
	vocab := len(logits)
	for i := range k {
		q := sp.dsmp.Dist(logits, ctx)
		d := sp.dsmp.Draw(q)
		if sp.params.Greedy() {
			d = q.IDs[0]
		}
		if d >= sp.target.e.Model.Arch.Vocab || d >= vocab {
			break
		}
		drafts = append(drafts, d)
		qs = append(qs, q)
		ctx = append(ctx, d)
		sp.draftConsumed = len(drafts) - 1
		if i == k-1 {
			break
		}
		if logits, err = ds.Forward([]int{d}, false); err != nil {
			return nil, nil, fmt.Errorf("engine: draft model: %w", err)
		}
	}
	sp.draftConsumed = max(len(drafts)-1, 0)
	// The draft consumed history and drafts[:len-1]: step's bookkeeping
	// assumes len(drafts)-1 of them, so an early stop rewinds the rest.
	if extra := len(ds.history) - len(history) - max(len(drafts)-1, 0); extra > 0 {
		if err := ds.rewind(extra); err != nil {
			return nil, nil, err
		}
	}
	return drafts, qs, nil
}

// proposeGreedy drafts k tokens with the draft's own greedy steps: after
// the tokens it has not consumed (all but the last in one Forward, which
// only the first step after a plain stretch needs), one ForwardGreedy of
// k+1 steps, a single submit on the device, consumes the last and the k
// drafts (the extra pick is dropped), so the next step again starts from
// the one token the target emits.
func (sp *speculator) proposeGreedy(history []int, k int) ([]int, []sample.Dist, error) {
	ds := sp.draft
	pend := history[sp.draftLen:]
	if len(pend) > 1 {
		if _, err := sp.catchUp(pend[:len(pend)-1], 0); err != nil {
			return nil, nil, err
		}
	}
	ids, err := ds.ForwardGreedy(pend[len(pend)-1], k+1, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("engine: draft model: %w", err)
	}
	drafts := ids[:k]
	for i, d := range drafts {
		if d >= sp.target.e.Model.Arch.Vocab {
			drafts = drafts[:i]
			break
		}
	}
	// The draft consumed history and all k picks; it keeps the drafts.
	if extra := k - len(drafts); extra > 0 {
		if err := ds.rewind(extra); err != nil {
			return nil, nil, err
		}
	}
	sp.draftConsumed = len(drafts)
	return drafts, nil, nil
}

// syncDraft makes a draft consume the tokens decoded since it last
// drafted (history but its last token) when the governor asks for it.
func (sp *speculator) syncDraft(history []int) error {
	if sp.gov == nil || !sp.gov.syncDraft() || sp.draft == nil {
		return nil
	}
	if len(sp.draft.history) != sp.draftLen || sp.draftLen >= len(history) {
		return fmt.Errorf("engine: draft session at %d positions, expected %d", len(sp.draft.history), sp.draftLen)
	}
	if pend := history[sp.draftLen : len(history)-1]; len(pend) > 0 {
		if _, err := sp.catchUp(pend, 0); err != nil {
			return err
		}
	}
	sp.draftLen = len(history) - 1
	return nil
}

// catchUp feeds the draft the tokens it has not consumed (those decoded
// while drafting paused, in one batched Forward) and tells the governor
// what the tokens beyond the last extra cost: what the next probe pays
// per token the draft falls behind.
func (sp *speculator) catchUp(tokens []int, extra int) ([]float32, error) {
	var t0 time.Time
	if sp.gov != nil {
		t0 = sp.gov.now()
	}
	logits, err := sp.draft.Forward(tokens, false)
	if err != nil {
		return nil, fmt.Errorf("engine: draft model: %w", err)
	}
	if sp.gov != nil {
		sp.gov.caughtUp(len(tokens)-extra, sp.gov.now().Sub(t0))
	}
	return logits, nil
}

// ngramDraft is prompt lookup: the tokens that followed the latest earlier
// occurrence of history's last n tokens (the longest n <= maxN that
// occurs), at most k of them.
func ngramDraft(history []int, maxN, k int) []int {
	L := len(history)
	for n := min(maxN, L-1); n >= 1; n-- {
		suffix := history[L-n:]
		for start := L - n - 1; start >= 0; start-- {
			if equalInts(history[start:start+n], suffix) {
				from := start + n
				return append([]int(nil), history[from:min(from+k, L)]...)
			}
		}
	}
	return nil
}

func equalInts(a, b []int) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// rewind drops the newest n positions: exactly by the backend's Rewinder
// when it can, else by replaying the kept positions (a device that fails
// to rewind hands the session to the CPU, as for any device failure).
func (s *session) rewind(n int) error {
	if n <= 0 {
		return nil
	}
	if n > len(s.history) {
		return fmt.Errorf("engine: rewind of %d positions of %d", n, len(s.history))
	}
	if s.ahead != nil {
		return errors.New("engine: rewind with a greedy batch in flight")
	}
	keep := s.history[:len(s.history)-n]
	if r, ok := s.cur.(backend.Rewinder); ok && r.Rewindable() >= n {
		err := r.Rewind(n)
		if err == nil {
			s.history = keep
			return nil
		}
		if s.onDevice {
			s.history = keep
			return s.toCPU(err)
		}
	}
	s.cur.Reset()
	s.history = keep
	if len(keep) > 0 {
		if _, err := s.cur.Forward(keep, false); err != nil {
			return err
		}
	}
	return nil
}
