package engine

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestSpecGovernor drives the governor's decisions with an injected cost
// model (no timing): each call costs a fixed time; speculative calls emit
// several tokens.
func TestSpecGovernor(t *testing.T) {
	type call struct {
		spec bool
		n    int
	}
	// run makes calls until total tokens, a speculative call costing
	// specCost(i) and emitting specN tokens, a plain one costing 1 ms for
	// one token (or plainCost(i) with runCosts); it returns the calls made.
	var plainCost func(i int) time.Duration
	run := func(g *specGovernor, total, specN int, specCost func(i int) time.Duration) []call {
		var now time.Time
		var calls []call
		var last call
		g.now = func() time.Time { return now }
		tokens := 0
		for tokens < total {
			g.mark()
			c := call{spec: g.speculate(), n: 1}
			if c.spec {
				c.n = specN
			}
			g.emitted(c.spec, c.n)
			if c.spec {
				now = now.Add(specCost(len(calls)))
			} else if plainCost != nil {
				now = now.Add(plainCost(len(calls)))
			} else {
				now = now.Add(time.Millisecond)
			}
			calls = append(calls, c)
			tokens += c.n
			last = c
		}
		_ = last
		return calls
	}
	count := func(calls []call) (spec, plain int) {
		for _, c := range calls {
			if c.spec {
				spec += c.n
			} else {
				plain += c.n
			}
		}
		return
	}

	t.Run("wins", func(t *testing.T) {
		// 3 tokens per 2 ms: 1.5x plain. Speculation runs, with a short
		// plain probe after every run.
		g := newSpecGovernor(nil)
		calls := run(g, 2000, 3, func(int) time.Duration { return 2 * time.Millisecond })
		spec, plain := count(calls)
		if g.paused != 0 || g.reason != "" {
			t.Errorf("paused %d times (%q) although speculation is faster", g.paused, g.reason)
		}
		if plain == 0 || plain*20 > spec {
			t.Errorf("%d tokens plain, %d speculative: want a few plain probes", plain, spec)
		}
		if got := tokS(g.cost[1]); math.Abs(got-1500) > 0.01 {
			t.Errorf("speculative rate %v, want 1500", got)
		}
	})
	t.Run("loses", func(t *testing.T) {
		// 2 tokens per 4 ms: half of plain. Speculation pauses with a
		// reason, for doubling stretches, so it decodes few tokens.
		g := newSpecGovernor(nil)
		calls := run(g, 4000, 2, func(int) time.Duration { return 4 * time.Millisecond })
		spec, plain := count(calls)
		if g.paused < 3 {
			t.Errorf("paused %d times", g.paused)
		}
		if !strings.Contains(g.reason, "speculation measured 500 tok/s, plain decoding 1000 tok/s") {
			t.Errorf("reason %q", g.reason)
		}
		if g.backoff <= g.minBackoff {
			t.Errorf("backoff %d did not grow", g.backoff)
		}
		// The time lost against plain decoding all along stays small.
		var took time.Duration
		for _, c := range calls {
			if c.spec {
				took += 4 * time.Millisecond
			} else {
				took += time.Millisecond
			}
		}
		plainTime := time.Duration(spec+plain) * time.Millisecond
		t.Logf("%d speculative tokens, %d plain: %v against %v", spec, plain, took, plainTime)
		if took > plainTime*105/100 {
			t.Errorf("governed decoding took %v, plain %v (%d speculative tokens)", took, plainTime, spec)
		}
	})
	t.Run("recovers", func(t *testing.T) {
		// Slow for the first 40 calls (the draft finds nothing), then fast:
		// speculation pauses, then resumes for good.
		g := newSpecGovernor(nil)
		calls := run(g, 3000, 4, func(i int) time.Duration {
			if i < 40 {
				return 8 * time.Millisecond
			}
			return 2 * time.Millisecond
		})
		if g.paused == 0 {
			t.Error("never paused while speculation was slow")
		}
		spec, _ := count(calls[len(calls)/2:])
		if spec == 0 || g.phase == runPlain {
			t.Errorf("speculation did not resume (phase %d)", g.phase)
		}
	})
	t.Run("hiccup", func(t *testing.T) {
		// A draft as large as the target (5 tokens per 12 ms, 0.42x of
		// plain) and one 25 ms hiccup in the first plain probe: the
		// probe's median still sees plain decoding at 1 ms a token, so
		// drafting pauses at the first decision (a mean of 4 ms a token
		// let speculation run for runTime).
		g := newSpecGovernor(nil)
		plainCost = func(i int) time.Duration {
			if i == 6 { // the probe's second call: its first measured one
				return 25 * time.Millisecond
			}
			return time.Millisecond
		}
		defer func() { plainCost = nil }()
		calls := run(g, 1000, 5, func(int) time.Duration { return 12 * time.Millisecond })
		spec, plain := count(calls)
		// Each speculative probe is 4 calls of 5 tokens; a run would be
		// hundreds of tokens.
		if g.paused == 0 || spec > 20*g.paused {
			t.Errorf("%d speculative tokens, %d plain, paused %d times: the hiccup made speculation look faster", spec, plain, g.paused)
		}
		var took time.Duration
		for i, c := range calls {
			if c.spec {
				took += 12 * time.Millisecond
			} else {
				took += plainCost(i)
			}
		}
		// Plain decoding all along would have had the hiccup too.
		if plainTime := time.Duration(spec+plain+24) * time.Millisecond; took > plainTime*111/100 {
			t.Errorf("governed decoding took %v, plain %v: under 0.9x", took, plainTime)
		}
	})
	t.Run("turns", func(t *testing.T) {
		// Fast (3 tokens per 2 ms) for the first 30 calls, then slow (2
		// per 8 ms, the drafts stopped matching): the speculative run
		// pauses after lossTime of slow calls, not after runTime.
		g := newSpecGovernor(nil)
		calls := run(g, 2000, 3, func(i int) time.Duration {
			if i < 30 {
				return 2 * time.Millisecond
			}
			return 8 * time.Millisecond
		})
		slow := 0 // speculative calls after the turn, before the first pause
		for _, c := range calls[30:] {
			if !c.spec {
				break
			}
			slow++
		}
		if g.paused == 0 || slow*8 > 60 {
			t.Errorf("%d slow speculative calls (%d ms) before pausing (paused %d times)", slow, slow*8, g.paused)
		}
	})
	t.Run("lastPlain", func(t *testing.T) {
		g := newSpecGovernor(nil)
		g.phase, g.plainRun, g.tokens, g.plainRunTime = runPlain, 10, 8, 0
		if g.lastPlain(1) || !g.lastPlain(2) {
			t.Error("lastPlain in a plain stretch of 10 at token 8")
		}
		// A stretch of 100 ms, 60 ms spent by a warm-up call and 4
		// measured ones of 10 ms: the next ends it only past 90 ms.
		g.plainRunTime, g.calls, g.spent, g.winT = 100*time.Millisecond, 5, 60*time.Millisecond, 40*time.Millisecond
		if g.lastPlain(2) {
			t.Error("lastPlain 40 ms before the stretch's end")
		}
		g.spent = 95 * time.Millisecond
		if !g.lastPlain(2) {
			t.Error("not lastPlain 5 ms before the stretch's end")
		}
		g.phase, g.calls, g.winN, g.winT = probePlain, 4, 9, 3*time.Millisecond
		if g.lastPlain(1) {
			t.Error("lastPlain in a plain probe 1 ms measured short of its 5")
		}
		g.winT = 4 * time.Millisecond
		if !g.lastPlain(1) {
			t.Error("not lastPlain at the plain probe's end")
		}
	})
}

// TestSpecGovernorBound: a draft that is never accepted (every speculative
// call emits one token) costs at most the ledger's budget (allowance +
// budget×tokens, plus a call misjudged: the first probe's are priced by a
// rough plain rate),
// whatever a speculative call costs against a plain one and whatever the
// draft's catch-up costs per token it is behind, over short and long
// generations: under 10% of plain decoding where the first probe costs a
// few plain steps. The probes back off (their count grows with the log of
// the length up to maxBackoff), and a draft whose catch-up costs more
// than the budget per token probes once. Costs are an injected model: no
// timing.
func TestSpecGovernorBound(t *testing.T) {
	const plain = time.Millisecond
	for _, c := range []struct {
		call  time.Duration // a speculative call (one token emitted)
		catch time.Duration // and its catch-up per token the draft is behind
	}{{3 * plain, plain / 10}, {6 * plain, plain / 10}, {6 * plain, plain}, {2 * plain, 0}, {2 * plain, plain / 50}, {4 * plain, plain / 40}} {
		for _, tc := range []struct {
			total  int
			prompt int // prompt tokens the draft read before decoding (0: none, it syncs at the first pause)
		}{{128, 0}, {512, 0}, {4096, 0}, {65536, 0}, {128, 8}, {512, 8}, {4096, 8}} {
			total := tc.total
			g := newSpecGovernor(nil)
			g.primed(tc.prompt-1, time.Duration(tc.prompt-1)*c.catch)
			var now time.Time
			g.now = func() time.Time { return now }
			var took time.Duration
			specCalls, behind := 0, 0
			for tokens := 0; tokens < total; tokens++ {
				g.mark()
				spec := g.speculate()
				g.emitted(spec, 1)
				d := plain
				if g.syncDraft() {
					// The draft catches up during this plain call.
					g.caughtUp(behind, time.Duration(behind)*c.catch)
					d += time.Duration(behind) * c.catch
					behind = 0
				}
				if spec {
					g.caughtUp(behind, time.Duration(behind)*c.catch)
					d = c.call + time.Duration(behind)*c.catch
					specCalls++
					behind = 0
				} else {
					behind++
				}
				now = now.Add(d)
				took += d
			}
			over := float64(took)/float64(time.Duration(total)*plain) - 1
			// Each probe is at most 1+probeCalls calls; probes come after
			// pauses of 256, 512, ... maxBackoff tokens.
			probes, pauses := 2, 0
			for n := g.minBackoff; pauses < total; n = min(2*n, g.maxBackoff) {
				probes++
				pauses += n
			}
			t.Logf("call %v, catch-up %v/token, prompt %d, %d tokens: %d speculative calls, %d pauses, %.1f%% slower than plain", c.call, c.catch, tc.prompt, total, specCalls, g.paused, 100*over)
			// The first probe's two calls (at most: priced by a rough
			// plain rate) and, when no prompt priced the draft's
			// catch-up, the catch-up at the first pause (on the plain
			// probes' tokens) are what the budget may not cover.
			first := 2 * c.call
			if tc.prompt == 0 {
				first += time.Duration(1+g.probeCalls+g.probeMin) * c.catch
			}
			if over > 0.10 && first <= 12*plain {
				t.Errorf("call %v, catch-up %v/token, %d tokens: governed decoding %.1f%% slower than plain (%d speculative calls)", c.call, c.catch, total, 100*over, specCalls)
			}
			if c.catch > time.Duration(g.budget*float64(plain)) && specCalls > 1+g.probeCalls {
				t.Errorf("call %v, catch-up %v/token, %d tokens: %d speculative calls: a catch-up over budget probed again", c.call, c.catch, total, specCalls)
			}
			if specCalls > probes*(1+g.probeCalls) {
				t.Errorf("call %v, %d tokens: %d speculative calls, want at most %d probes of %d", c.call, total, specCalls, probes, 1+g.probeCalls)
			}
			if bound := g.allowance + g.budget*float64(total) + float64(first)/float64(plain); g.loss() > bound {
				t.Errorf("call %v, %d tokens: the ledger lost %.1f plain tokens, its bound is %.1f", c.call, total, g.loss(), bound)
			}
		}
	}
}

// TestSpecGovernorDry: speculative calls that found nothing to draft (n-gram
// lookup before the text repeats) are plain steps to the governor: a probe
// of them does not lose for accepting nothing, and once drafts come and win
// (3 tokens per 2 ms against 1 ms a token) speculation runs. Costs are an
// injected model: no timing.
func TestSpecGovernorDry(t *testing.T) {
	g := newSpecGovernor(nil)
	var now time.Time
	g.now = func() time.Time { return now }
	specCalls, specTokens := 0, 0
	for tokens, call := 0, 0; tokens < 600; call++ {
		g.mark()
		n, d := 1, time.Millisecond
		if g.speculate() {
			specCalls++
			if call < 8 {
				g.curDry = true // nothing to draft: a plain step
			} else {
				n, d = 3, 2*time.Millisecond
				specTokens += n
			}
		}
		g.emitted(g.speculate(), n)
		now = now.Add(d)
		tokens += n
	}
	t.Logf("%d speculative calls, %d tokens from drafts, paused %d (%q)", specCalls, specTokens, g.paused, g.reason)
	if g.paused != 0 || specTokens < 300 {
		t.Errorf("dry calls paused speculation (%d times, %q); %d tokens from drafts", g.paused, g.reason, specTokens)
	}
}
