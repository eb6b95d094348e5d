package engine

import (
	"fmt"
	"slices"
	"time"
)

// specGovernor keeps speculation from costing decode speed: it measures
// the wall time per emitted token of speculative steps and of plain steps
// (each decode call's interval runs from its start to the next call's
// start, so the host's handling of the tokens counts) and lets the
// generation speculate only while that is the faster of the two.
//
// Phases: a quick plain probe (a few calls, for a rough plain rate), a
// speculative probe (a few calls, 5 ms at least), a plain probe, then a
// decision. Speculation that wins runs for runTokens tokens
// (and runTime) and is then compared against a fresh plain probe;
// speculation that loses is paused for a plain stretch of backoff tokens
// (and backoffTime; both doubling with each loss in a row, up to
// maxBackoff), after which a speculative probe decides again. The first
// call of every phase is not measured: it carries the switch (a draft
// catching up on the tokens decoded plainly, a greedy pipeline starting).
//
// The worst case is bounded by construction, whatever the clock says. A
// ledger counts the time speculation lost against plain decoding, in
// plain tokens (at the last measured plain rate): every speculative
// call's time over its tokens' plain time, and the first plain call after
// speculation (its switch back). Speculation may lose allowance plain
// tokens plus budget of every token emitted: once plain decoding is
// measured, a speculative call runs only while the budget left covers
// what the phase's calls lost each, and a pause ends only once the budget
// covers the last probe's loss again plus the draft's catch-up on the
// tokens decoded since, at the last catch-up's measured cost (a draft
// whose catch-up costs more than budget per token never probes again;
// the first is priced by the draft's read of the prompt, or, after a
// prompt of one token, by a catch-up at the first pause, syncDraft).
// The first probe, priced by the quick plain probe's rough rate, also
// stops after two calls that accepted nothing. Any probe is at most
// maxProbe calls and loses after 1+probeCalls calls that drafted and
// accepted nothing, however its time compares (a call that found
// nothing to draft is a plain step: it neither counts nor gains); its
// first call drafts one token (spec.go).
// So a draft that is never accepted costs at most allowance +
// budget×tokens plain tokens (plus one call misjudged), in at most
// log2(tokens/minBackoff)+2 probes (more once pauses reach maxBackoff).
//
// Two guards keep one bad measurement from costing a whole run. A plain
// probe is short and its calls are alike (one greedy batch each), so one
// hiccup in it (a collection, a clock ramp) could make plain decoding look
// several times slower than it is and speculation win for runTime: plain
// decoding is measured as the median time per token of its calls, not the
// mean. And a speculative run keeps measuring: once it has lossTime of
// calls whose rate is clearly below the plain rate (lossMargin), it pauses
// at once instead of running out runTokens (the draft stopped matching, or
// the probe that let it run was lucky).
type specGovernor struct {
	now        func() time.Time
	probeCalls int           // measured calls of a probe
	maxProbe   int           // calls of a speculative probe, at most
	probeMin   int           // measured tokens of a plain probe, at least
	probeTime  time.Duration // measured time of a probe, at least (a busy host's noise)
	runTokens  int           // tokens speculation runs after winning
	runTime    time.Duration // and time, at least
	// lossTime is the measured time after which a speculative run that
	// is slower than plain decoding by lossMargin (a ratio of the time
	// per token) pauses before runTokens.
	lossTime   time.Duration
	lossMargin float64
	backoff    int // the next plain stretch after a loss, in tokens
	minBackoff int
	maxBackoff int
	// backoffTime is the next plain stretch's least time (it doubles
	// with backoff).
	backoffTime, minBackoffTime time.Duration
	// budget is the share of every emitted token's plain time that
	// speculation may lose over the generation, allowance the plain
	// tokens it may lose before that.
	budget, allowance float64

	phase  govPhase
	calls  int           // calls recorded in the phase
	tokens int           // their tokens
	spent  time.Duration // their time
	winT   time.Duration // the measured calls' time (all but the first)
	winN   int           // and tokens
	gained bool          // a speculative call of the phase emitted more than one token
	tried  int           // its speculative calls that drafted (a dry one is a plain step)
	// perTok holds a plain phase's measured calls' time per token (for
	// the median).
	perTok []time.Duration
	// cost is the last measured time per token of plain [0] and
	// speculative [1] decoding (0: not measured yet).
	cost         [2]time.Duration
	plainRun     int // the current plain stretch
	plainRunTime time.Duration

	// The ledger, kept as times and tokens (the plain rate that prices
	// them may be measured later): the speculative calls' and the
	// switches back's, and the tokens emitted in all.
	specT time.Duration
	specN int
	total int
	back  bool // the plain phase's next call is a switch back
	// The last speculative phase: its calls' time and tokens but its
	// catch-ups (for the next probe's estimate), its switch back, its
	// measured calls (for callLoss), and its catch-ups' time and tokens.
	lastT           time.Duration
	lastN           int
	lastWinT        time.Duration
	lastWinN, lastM int
	lastGained      bool
	rough           bool          // cost[0] is probeQuick's
	synced          bool          // syncDraft asked once
	catchT          time.Duration // the current phase's catch-ups
	catchN          int
	catchRate       time.Duration // the last catch-up's time per token
	behind          int           // tokens decoded plainly since the last speculative call

	open     bool
	curStart time.Time
	curSpec  bool
	curN     int
	curDry   bool // the call drafted nothing (set by the speculator)

	paused int
	reason string
}

type govPhase int

const (
	probeSpec govPhase = iota
	probePlain
	runSpec
	runPlain
	probeQuick // the first phase: a few plain calls
)

func newSpecGovernor(now func() time.Time) *specGovernor {
	if now == nil {
		now = time.Now
	}
	return &specGovernor{now: now, probeCalls: 3, maxProbe: 16, probeMin: 8, probeTime: 5 * time.Millisecond,
		runTokens: 256, runTime: 250 * time.Millisecond, lossTime: 20 * time.Millisecond, lossMargin: 1.1,
		backoff: 256, minBackoff: 256, maxBackoff: 4096, backoffTime: 250 * time.Millisecond, minBackoffTime: 250 * time.Millisecond,
		budget: 0.05, allowance: 4, phase: probeQuick}
}

// speculate reports whether the next decode call speculates.
func (g *specGovernor) speculate() bool {
	return g.phase == probeSpec || g.phase == runSpec
}

// opening reports whether the next call is a speculative probe's first.
func (g *specGovernor) opening() bool { return g.phase == probeSpec && g.calls == 0 }

// mark is called as a decode call starts: it closes the previous call's
// interval.
func (g *specGovernor) mark() {
	t := g.now()
	if g.open && g.curN > 0 {
		g.record(g.curSpec, g.curN, t.Sub(g.curStart))
	}
	g.open, g.curStart, g.curN, g.curDry = true, t, 0, false
}

// emitted says what the call just made produced: n tokens, speculatively
// or not.
func (g *specGovernor) emitted(spec bool, n int) {
	g.curSpec, g.curN = spec, n
}

// lastPlain reports whether a plain call of k tokens likely ends the
// plain phase (taking as long as the phase's measured calls did on
// average), so the caller submits nothing ahead of it. A wrong guess
// costs one step: a batch submitted ahead and dropped, or one call not
// pipelined.
func (g *specGovernor) lastPlain(k int) bool {
	var next time.Duration
	if m := g.calls - 1; m > 0 {
		next = g.winT / time.Duration(m)
	}
	switch g.phase {
	case probeQuick:
		return g.calls+1 >= 1+g.probeCalls
	case probePlain:
		return g.calls+1 >= 1+g.probeCalls && g.winN+k >= g.probeMin && g.winT+next >= g.probeTime
	case runPlain:
		return g.tokens+k >= g.plainRun && g.spent+next >= g.plainRunTime && g.affordable(k)
	}
	return true
}

// plain is d in plain tokens (0 before plain decoding is measured).
func (g *specGovernor) plain(d time.Duration) float64 {
	if g.cost[0] <= 0 {
		return 0
	}
	return float64(d) / float64(g.cost[0])
}

// loss is what speculation lost so far, in plain tokens (negative: won).
func (g *specGovernor) loss() float64 { return g.plain(g.specT) - float64(g.specN) }

// left is the ledger's budget not yet lost, after extra more tokens.
func (g *specGovernor) left(extra int) float64 {
	return g.allowance + g.budget*float64(g.total+extra) - g.loss()
}

// affordable reports whether, extra tokens from now, the budget left
// covers another probe: the last losing one's loss, and the draft's
// catch-up on the tokens it will be behind (at the last catch-up's cost
// per token: its fixed part, a submit, extrapolated too, which errs on
// the safe side).
func (g *specGovernor) affordable(extra int) bool {
	need := max(0, g.plain(g.lastT)-float64(g.lastN)) + g.plain(g.catchRate)*float64(g.behind+extra)
	return g.left(extra) >= need
}

// caughtUp reports that a draft took d to consume the n tokens it was
// behind: in a speculative call (part of the call's time), or asked by
// syncDraft during a pause (a loss of its own).
func (g *specGovernor) caughtUp(n int, d time.Duration) {
	if n <= 0 {
		return
	}
	g.catchRate = d / time.Duration(n)
	if g.speculate() {
		g.catchT += d
		g.catchN += n
		return
	}
	g.specT += d
	g.behind = 0
}

// primed reports that a draft took d to read n tokens of the prompt
// (before decoding): the cost of its catch-ups until one is measured.
func (g *specGovernor) primed(n int, d time.Duration) {
	if n > 0 {
		g.catchRate = d / time.Duration(n)
	}
}

// syncDraft reports whether a draft should catch up now, during the
// call about to start: once, at the first pause, while its catch-up cost
// is unknown (a prompt of one token tells nothing; the first probe needs
// no catch-up: the draft read the prompt), so that the next probe's is
// known while the draft is a few tokens behind, not hundreds.
func (g *specGovernor) syncDraft() bool {
	if g.phase != runPlain || g.catchRate > 0 || g.synced || g.behind == 0 {
		return false
	}
	g.synced = true
	return true
}

// callLoss is what the next speculative call of the phase is expected to
// lose: the mean loss of its measured calls; before there are any, none
// in a run (a probe measured it winning), else the last probe's, else the
// first call's but its catch-up.
func (g *specGovernor) callLoss() float64 {
	if m := g.calls - 1; m > 0 {
		return max(0, g.plain(g.winT)-float64(g.winN)) / float64(m)
	}
	if g.phase == runSpec {
		return 0
	}
	if g.lastM > 0 {
		return max(0, g.plain(g.lastWinT)-float64(g.lastWinN)) / float64(g.lastM)
	}
	return max(0, g.plain(g.spent-g.catchT)-float64(g.tokens))
}

func (g *specGovernor) record(spec bool, n int, d time.Duration) {
	if spec != g.speculate() {
		return // a call of the other mode (cannot happen: one call per decision)
	}
	g.total += n
	switch {
	case spec:
		g.specT += d
		g.specN += n
		g.gained = g.gained || n > 1
		if !g.curDry {
			g.tried++
		}
	case g.back:
		// The switch back: the first plain call after speculation.
		g.specT += d
		g.specN += n
		g.lastT += d
		g.lastN += n
		g.back = false
		g.behind += n
	default:
		g.behind += n
	}
	g.calls++
	g.tokens += n
	g.spent += d
	if g.calls > 1 {
		g.winT += d
		g.winN += n
		if !spec {
			g.perTok = append(g.perTok, d/time.Duration(n))
		}
	}
	switch g.phase {
	case probeSpec:
		nothing := !g.gained && (g.tried >= 1+g.probeCalls || (g.rough && g.tried >= 2))
		switch {
		case g.left(0) < g.callLoss() || nothing:
			// The budget does not cover another call like the last, or
			// nothing was accepted: a speculative call emits what a
			// plain one does, later.
			g.cost[1] = g.specRate()
			g.endSpec()
			g.pause()
		case g.calls >= g.maxProbe || (g.calls >= 1+g.probeCalls && g.winT >= g.probeTime):
			g.cost[1] = g.measured()
			g.endSpec()
			if g.rough {
				g.enter(probePlain) // a full plain probe decides
			} else {
				g.decide()
			}
		}
	case probeQuick:
		// A rough plain rate, so that the budget prices the first
		// speculative probe's calls.
		if g.calls >= 1+g.probeCalls {
			g.cost[0], g.rough = g.median(), true
			g.enter(probeSpec)
		}
	case probePlain:
		if g.calls >= 1+g.probeCalls && g.winN >= g.probeMin && g.winT >= g.probeTime {
			g.cost[0], g.rough = g.median(), false
			g.decide()
		}
	case runSpec:
		m := g.measured()
		switch {
		case g.tokens >= g.runTokens && g.spent >= g.runTime:
			g.cost[1] = m
			g.endSpec()
			g.enter(probePlain)
		case g.left(0) < g.callLoss():
			g.cost[1] = g.specRate()
			g.endSpec()
			g.pause()
		case g.cost[0] > 0 && g.calls >= 1+g.probeCalls && g.winT >= g.lossTime && float64(m) > g.lossMargin*float64(g.cost[0]):
			g.cost[1] = m
			g.endSpec()
			g.decide()
		}
	case runPlain:
		if g.tokens >= g.plainRun && g.spent >= g.plainRunTime && g.affordable(0) {
			g.cost[0] = g.median()
			g.enter(probeSpec)
		}
	}
}

// measured is the time per token of the phase's measured calls (at
// least a nanosecond, so a coarse clock never makes a mode look free).
func (g *specGovernor) measured() time.Duration {
	if g.winN == 0 {
		return 0
	}
	return max(g.winT/time.Duration(g.winN), 1)
}

// specRate is the speculative phase's time per token: its measured
// calls', or its first call's when it ended before measuring any.
func (g *specGovernor) specRate() time.Duration {
	if m := g.measured(); m > 0 {
		return m
	}
	return max(g.spent/time.Duration(max(g.tokens, 1)), 1)
}

// median is the median time per token of a plain phase's measured calls
// (at least a nanosecond).
func (g *specGovernor) median() time.Duration {
	if len(g.perTok) == 0 {
		return g.measured()
	}
	v := slices.Clone(g.perTok)
	slices.Sort(v)
	m := v[len(v)/2]
	if len(v)%2 == 0 {
		m = (v[len(v)/2-1] + m) / 2
	}
	return max(m, 1)
}

// endSpec closes a speculative phase: what it cost (but its catch-ups)
// is what the next probe must find in the budget, its switch back is
// the next plain call.
func (g *specGovernor) endSpec() {
	g.lastT, g.lastN = g.spent-g.catchT, g.tokens
	if g.calls > 1 {
		g.lastWinT, g.lastWinN, g.lastM = g.winT, g.winN, g.calls-1
	}
	g.lastGained, g.back = g.gained, true
}

func (g *specGovernor) enter(p govPhase) {
	if (p == probeSpec || p == runSpec) && !g.speculate() {
		g.behind, g.catchT, g.catchN = 0, 0, 0
	}
	g.phase, g.calls, g.tokens, g.spent, g.winT, g.winN, g.gained, g.tried = p, 0, 0, 0, 0, 0, false, 0
	g.perTok = g.perTok[:0]
}

// decide compares the last measurements: speculation runs on when it is
// at least as fast as plain decoding and accepted something, else it
// pauses.
func (g *specGovernor) decide() {
	plain, spec := g.cost[0], g.cost[1]
	if g.lastGained && (plain == 0 || spec == 0 || spec <= plain) {
		g.backoff, g.backoffTime = g.minBackoff, g.minBackoffTime
		g.enter(runSpec)
		return
	}
	g.pause()
}

// pause stops drafting for a plain stretch of backoff tokens (doubling
// with each loss in a row).
func (g *specGovernor) pause() {
	plain, spec := g.cost[0], g.cost[1]
	g.paused++
	g.plainRun, g.plainRunTime = g.backoff, g.backoffTime
	g.reason = fmt.Sprintf("speculation measured %.0f tok/s, plain decoding %.0f tok/s: drafting paused for %d tokens", tokS(spec), tokS(plain), g.plainRun)
	if g.backoff < g.maxBackoff {
		g.backoff, g.backoffTime = min(2*g.backoff, g.maxBackoff), 2*g.backoffTime
	}
	g.enter(runPlain)
}

func tokS(perToken time.Duration) float64 {
	if perToken <= 0 {
		return 0
	}
	return float64(time.Second) / float64(perToken)
}
