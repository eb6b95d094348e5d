//go:build !js

package engine

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cortiq/cortiq/fixtures"
	"github.com/cortiq/cortiq/sample"
)

// specPrompt repeats a few ids so that prompt lookup finds n-grams.
func specPrompt(vocab int) []int {
	var ids []int
	for range 2 {
		for _, x := range []int{5, 17, 33, 101, 7, 250, 64, 3} {
			ids = append(ids, x%vocab)
		}
	}
	return ids
}

// checkSpecGreedy generates greedily without speculation, then with n-gram
// lookup and with each draft, and wants the same tokens. It returns the
// n-gram steps taken (lookup finds nothing in some generations).
func checkSpecGreedy(t *testing.T, target *Engine, req Request, drafts map[string]*Engine) (ngramSteps int) {
	t.Helper()
	want, err := target.Generate(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	specs := map[string]*Spec{"ngram": {Mode: "ngram", K: 4, Always: true}, "ngram/governed": {Mode: "ngram", K: 4, tune: flipFlop}}
	for name, d := range drafts {
		specs["draft="+name] = &Spec{Mode: "draft", K: 3, Draft: d, Always: true}
		specs["draft="+name+"/governed"] = &Spec{Mode: "draft", K: 3, Draft: d, tune: flipFlop}
	}
	for name, sp := range specs {
		r := req
		r.Spec = sp
		got, err := target.Generate(context.Background(), r, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(got.IDs, want.IDs) || got.Text != want.Text {
			t.Errorf("%s: speculative greedy %v\nplain greedy            %v", name, got.IDs, want.IDs)
		}
		if got.Backend != want.Backend || got.DeviceError != want.DeviceError || got.FallbackOps != want.FallbackOps {
			t.Errorf("%s: ran on %s (%d fallbacks, %q), plain on %s (%d, %q)", name, got.Backend, got.FallbackOps, got.DeviceError, want.Backend, want.FallbackOps, want.DeviceError)
		}
		if got.Spec == nil {
			t.Fatalf("%s: no speculative statistics", name)
		}
		if strings.HasSuffix(name, "/governed") {
			if got.Spec.Paused == 0 || got.Spec.PlainTokens == 0 || got.Spec.DisabledReason == "" {
				t.Errorf("%s: the governor never paused speculation (%+v)", name, *got.Spec)
			}
		} else if name == "ngram" {
			ngramSteps += got.Spec.Steps
		} else if got.Spec.Steps == 0 {
			t.Errorf("%s: no speculative step taken (%+v)", name, got.Spec)
		}
		if vocab := target.Model.Arch.Vocab; got.Backend != "cpu" && argmaxOnly(req.Sampling) && got.Spec.ReadbackPerToken >= float64(vocab) {
			// Greedy verification reads ids back, not rows of logits (4
			// bytes each; the draft's one catch-up row is all there is).
			t.Errorf("%s: %.0f bytes read back per token, a row of logits is %d", name, got.Spec.ReadbackPerToken, 4*vocab)
		}
		if name == "draft=self" && got.Spec.Rate != 1 {
			t.Errorf("%s: a draft equal to the target accepted %.2f of its tokens, want all", name, got.Spec.Rate)
		}
		t.Logf("%s: %+v", name, *got.Spec)
	}
	return ngramSteps
}

// flipFlop tunes a governor to switch often: one-call probes, short runs
// and pauses, a budget that never runs out, and a clock under which
// speculative calls cost 10 ms each during its first 4 decisions (so
// speculation loses), 1 ms after.
func flipFlop(g *specGovernor) {
	g.probeCalls, g.probeMin, g.runTokens, g.minBackoff, g.backoff, g.maxBackoff = 1, 1, 3, 2, 2, 3
	g.allowance = 1e9
	g.probeTime, g.runTime, g.backoffTime, g.minBackoffTime = 0, 0, 0, 0
	var now time.Time
	marks := 0
	g.now = func() time.Time {
		marks++
		if g.curSpec && marks < 12 {
			now = now.Add(10 * time.Millisecond)
		} else {
			now = now.Add(time.Millisecond)
		}
		return now
	}
}

// TestSpecGreedyFixtures: speculative greedy (n-gram lookup, a draft equal
// to the target, a draft of another family) equals plain greedy on every
// fixture family, on the CPU.
func TestSpecGreedyFixtures(t *testing.T) {
	load := func(arch, backend string) *Engine {
		return loadEngine(t, filepath.Join(fixtures.Dir(t), "fixtures", "tiny", arch), backend)
	}
	other := load("qwen2", "cpu")
	ngram := 0
	for _, arch := range slices.Concat(fixtures.Dense, fixtures.Hybrid) {
		t.Run(arch, func(t *testing.T) {
			e := load(arch, "cpu")
			self := load(arch, "cpu")
			req := Request{IDs: specPrompt(e.Model.Arch.Vocab), MaxTokens: 20, IgnoreEOS: true}
			ngram += checkSpecGreedy(t, e, req, map[string]*Engine{"self": self, "qwen2": other})
		})
	}
	if ngram < 20 {
		t.Errorf("n-gram lookup drafted in %d steps over all fixtures", ngram)
	}
}

// TestSpecGreedyPenalized: greedy with a repetition penalty verifies from
// the logits (the penalty needs them), speculative equal to plain, on
// the CPU and the device.
func TestSpecGreedyPenalized(t *testing.T) {
	for _, backend := range []string{"cpu", "webgpu"} {
		for _, arch := range []string{"llama", "qwen3_next"} {
			t.Run(backend+"/"+arch, func(t *testing.T) {
				if backend == "webgpu" {
					needAdapter(t)
				}
				e := loadEngine(t, filepath.Join(fixtures.Dir(t), "fixtures", "tiny", arch), backend)
				if backend == "webgpu" && e.dev == nil {
					t.Skipf("no device backend: %v", e.DeviceError())
				}
				req := Request{IDs: specPrompt(e.Model.Arch.Vocab), MaxTokens: 16, IgnoreEOS: true, Sampling: sample.Params{RepeatPenalty: 1.3}}
				if argmaxOnly(req.Sampling) {
					t.Fatal("a penalized request counts as argmax-only")
				}
				checkSpecGreedy(t, e, req, map[string]*Engine{"self": e})
			})
		}
	}
}

// TestSpecGreedyDevice is TestSpecGreedyFixtures on the device (lavapipe
// here): every fixture family, n-gram lookup and a draft equal to the
// target (one engine drafting for itself).
func TestSpecGreedyDevice(t *testing.T) {
	needAdapter(t)
	for _, arch := range slices.Concat(fixtures.Dense, fixtures.Hybrid) {
		t.Run(arch, func(t *testing.T) {
			dir := filepath.Join(fixtures.Dir(t), "fixtures", "tiny", arch)
			e := loadEngine(t, dir, "webgpu")
			if e.dev == nil {
				t.Skipf("no device backend: %v", e.DeviceError())
			}
			req := Request{IDs: specPrompt(e.Model.Arch.Vocab), MaxTokens: 16, IgnoreEOS: true}
			checkSpecGreedy(t, e, req, map[string]*Engine{"self": e})
		})
	}
}

// TestSpecGreedyStories: stories260K continuing its own story, n-gram and
// self-draft, equals plain greedy (the known text), CPU and device.
func TestSpecGreedyStories(t *testing.T) {
	path := filepath.Join(fixtures.Dir(t), "fixtures", "models", "stories260K.gguf")
	for _, backend := range []string{"cpu", "webgpu"} {
		t.Run(backend, func(t *testing.T) {
			if backend == "webgpu" {
				needAdapter(t)
			}
			e := loadEngine(t, path, backend)
			if backend == "webgpu" && e.dev == nil {
				t.Skipf("no device backend: %v", e.DeviceError())
			}
			self := loadEngine(t, path, backend)
			req := Request{Prompt: "Once upon a time", MaxTokens: 64}
			checkSpecGreedy(t, e, req, map[string]*Engine{"self": self})
			r := req
			r.Spec = &Spec{Mode: "ngram"}
			res, err := e.Generate(context.Background(), r, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := "Once upon a time" + res.Text; got != storiesText {
				t.Errorf("n-gram speculative text\n got %q\nwant %q", got, storiesText)
			}
		})
	}
}

// TestSpecDraftVocab: a draft whose vocabulary differs is refused, naming
// the difference.
func TestSpecDraftVocab(t *testing.T) {
	e := loadEngine(t, filepath.Join(fixtures.Dir(t), "fixtures", "models", "stories260K.gguf"), "cpu")
	d := loadEngine(t, filepath.Join(fixtures.Dir(t), "fixtures", "tiny", "llama"), "cpu")
	_, err := e.Generate(context.Background(), Request{Prompt: "Once", MaxTokens: 4, Spec: &Spec{Mode: "draft", Draft: d}}, nil)
	if err == nil {
		t.Fatal("a draft without the target's vocabulary was accepted")
	}
	t.Log(err)
	if _, err := e.Generate(context.Background(), Request{Prompt: "Once", MaxTokens: 4, Spec: &Spec{Mode: "lookahead"}}, nil); err == nil {
		t.Error("an unknown speculative mode was accepted")
	}
}

// TestSpecSamplingDistribution: with sampling, speculative decoding keeps
// the output distribution. Over many seeded runs of three tokens on a tiny
// model, the triples drawn speculatively (a draft sampling otherwise than
// the target, whose proposals are often rejected, and n-gram lookup) fit the exact
// distribution computed from the target's logits (chi-square).
func TestSpecSamplingDistribution(t *testing.T) {
	load := func(arch string) *Engine {
		return loadEngine(t, filepath.Join(fixtures.Dir(t), "fixtures", "tiny", arch), "cpu")
	}
	e, draft := load("llama"), load("llama")
	params := sample.Params{Temperature: 1, TopK: 4}
	ctx := context.Background()
	type tc struct {
		name   string
		spec   *Spec
		prompt []int
	}
	// Every step speculates with K drafts (Always: a governed probe's
	// first step drafts one). The draft
	// samples the same model more broadly or more narrowly than
	// the target, so drafts are rejected (and, with top-k 2, the target's
	// candidates outside the draft's come only from the residual).
	base := []int{5, 17, 33, 5, 17}
	dist := func(ids []int) sample.Dist {
		l, err := e.Logits(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		vocab := e.Model.Arch.Vocab
		return sample.New(params).Dist(l[len(l)-vocab:], ids)
	}
	// The n-gram prompt holds many ids once, so lookup drafts after many
	// first tokens (the tiny model's predictions shift with every token of
	// the context, so drafts that it accepts cannot be planted: this case
	// checks the one-hot draft's rejections; the draft cases the rest).
	var ramp []int
	for i := range 60 {
		ramp = append(ramp, (7*i+3)%e.Model.Arch.Vocab)
	}
	cases := []tc{
		{"draft(temp 2, top-k 6)", &Spec{Mode: "draft", K: 3, Draft: draft, DraftSampling: &sample.Params{Temperature: 2, TopK: 6}, Always: true}, base},
		{"draft(temp 0.5, top-k 2)", &Spec{Mode: "draft", K: 3, Draft: draft, DraftSampling: &sample.Params{Temperature: 0.5, TopK: 2}, Always: true}, base},
		{"ngram", &Spec{Mode: "ngram", K: 3, Always: true}, append(ramp, base...)},
	}
	for _, c := range cases {
		// The exact distribution of the first three tokens (the second and
		// third come from one speculative step: a draft checked, then the
		// correction or the bonus).
		prompt := c.prompt
		exact := map[[3]int]float64{}
		d1 := dist(prompt)
		for i, a := range d1.IDs {
			d2 := dist(append(slices.Clone(prompt), a))
			for j, b := range d2.IDs {
				d3 := dist(append(slices.Clone(prompt), a, b))
				for k, c := range d3.IDs {
					exact[[3]int{a, b, c}] = d1.P[i] * d2.P[j] * d3.P[k]
				}
			}
		}
		const runs = 3000
		counts := map[[3]int]int{}
		var drafted, accepted int
		for seed := range runs {
			p := params
			p.Seed = uint64(seed) + 1
			res, err := e.Generate(ctx, Request{IDs: prompt, MaxTokens: 3, Sampling: p, IgnoreEOS: true, Spec: c.spec}, nil)
			if err != nil {
				t.Fatal(err)
			}
			counts[[3]int{res.IDs[0], res.IDs[1], res.IDs[2]}]++
			drafted += res.Spec.Drafted
			accepted += res.Spec.Accepted
		}
		var chi2 float64
		df := -1
		for pair, p := range exact {
			want := p * runs
			if want < 5 {
				continue // too rare for the test
			}
			df++
			d := float64(counts[pair]) - want
			chi2 += d * d / want
		}
		for triple, n := range counts {
			if _, ok := exact[triple]; !ok {
				t.Errorf("%s: %v drawn %d times has probability 0", c.name, triple, n)
			}
		}
		// The 99.9th percentile of chi-square (Wilson–Hilferty).
		z := 3.09
		k := float64(df)
		crit := k * math.Pow(1-2/(9*k)+z*math.Sqrt(2/(9*k)), 3)
		t.Logf("%s: chi2 %.1f over %d degrees of freedom (critical %.1f); %d drafted, %d accepted", c.name, chi2, df, crit, drafted, accepted)
		if chi2 > crit {
			t.Errorf("%s: the speculative distribution differs from the target's: chi2 %.1f > %.1f", c.name, chi2, crit)
		}
		if drafted == 0 || accepted == drafted || (accepted == 0 && c.spec.Mode == "draft") {
			t.Errorf("%s: %d drafted, %d accepted: the rejection path is not exercised", c.name, drafted, accepted)
		}
	}
}

// TestSpecNeverAccepted: a generation whose drafter is never accepted
// (it proposes, after each position, a token other than the target's
// greedy pick) emits the plain greedy tokens, and the governor bounds what
// the drafts cost: few drafter calls and verify steps, backing off over a
// long generation, and a modelled cost within 10% of plain decoding. The
// clock is a cost model (a plain token 1 ms; a speculative call a draft
// as large as the target: k+1 draft steps of 1 ms, its catch-up at 0.04
// ms a token, a verify of 1 + k/4 ms): no timing.
func TestSpecNeverAccepted(t *testing.T) {
	path := filepath.Join(fixtures.Dir(t), "fixtures", "models", "stories260K.gguf")
	e := loadEngine(t, path, "cpu")
	for _, n := range []int{128, 1024} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			req := Request{Prompt: "Once upon a time", MaxTokens: n, IgnoreEOS: true}
			want, err := e.Generate(context.Background(), req, nil)
			if err != nil {
				t.Fatal(err)
			}
			prompt := want.PromptTokens
			const ms = time.Millisecond
			var now time.Time
			var model, pending time.Duration // the modelled decode time; the call in progress
			var gov *specGovernor
			drafts, seen := 0, 0
			sp := &Spec{Mode: "ngram", K: 4}
			sp.drafter = func(history []int, k int) []int {
				drafts++
				at := len(history) - prompt // the index in want.IDs of the first draft
				if seen == 0 {
					seen = len(history) - 1
				}
				var d []int
				for i := range k {
					d = append(d, (want.IDs[min(at+i, len(want.IDs)-1)]+1)%e.Model.Arch.Vocab)
				}
				// Catch-up on the tokens since the last call (told to the
				// governor, as the draft session's is), k+1 draft steps, a
				// verify of k+1 tokens.
				behind := len(history) - 1 - seen
				gov.caughtUp(behind, time.Duration(behind)*ms/25)
				pending = time.Duration(behind)*ms/25 + time.Duration(k+1)*ms + ms + time.Duration(k)*ms/4
				seen = len(history)
				return d
			}
			sp.tune = func(g *specGovernor) {
				gov = g
				g.now = func() time.Time {
					d := time.Duration(g.curN) * ms // the call that ends: plain
					if g.curSpec {
						d = pending
					}
					if g.open {
						now = now.Add(d)
						model += d
					}
					pending = 0
					return now
				}
			}
			r := req
			r.Spec = sp
			got, err := e.Generate(context.Background(), r, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.IDs, want.IDs) {
				t.Fatalf("speculative greedy %v\nplain greedy %v", got.IDs, want.IDs)
			}
			st := got.Spec
			plain := time.Duration(n-1) * ms // the decode calls after the first token
			t.Logf("%d tokens: %d drafter calls, %d verify steps, %d drafted, %d accepted, %d plain tokens, paused %d: modelled %v against %v plain (%q)",
				n, drafts, st.Steps, st.Drafted, st.Accepted, st.PlainTokens, st.Paused, model, plain, st.DisabledReason)
			if st.Accepted != 0 || st.Steps != drafts {
				t.Errorf("%d drafter calls, %d verify steps, %d accepted: want every drafted step verified and none accepted", drafts, st.Steps, st.Accepted)
			}
			// A probe is at most 4 calls; probes follow pauses of 256,
			// 512, ... tokens.
			if max := 4 * (1 + bits.Len(uint(n/256))); drafts > max {
				t.Errorf("%d drafter calls over %d tokens, want at most %d", drafts, n, max)
			}
			if model > plain*110/100 {
				t.Errorf("modelled decode %v, plain %v: over 10%% slower", model, plain)
			}
		})
	}
}
