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
// Phases: a speculative probe (a few calls, 5 ms at least), a plain
// probe, then a decision. Speculation that wins runs for runTokens tokens
// (and runTime) and is then compared against a fresh plain probe;
// speculation that loses is paused for a plain stretch of backoff tokens
// (and backoffTime; both doubling with each loss in a row, up to
// maxBackoff), after which a speculative probe decides again.
// The first call of every phase is not measured: it carries the switch
// (a draft catching up on the tokens decoded plainly, a greedy pipeline
// starting).
//
// Two guards keep one bad measurement from costing a whole run. A plain
// probe is short and its calls are alike (one greedy batch each), so one
// hiccup in it (a collection, a clock ramp) could make plain decoding look
// several times slower than it is and speculation win for runTime: it is
// measured as the median time per token of its calls, not the mean. And a
// speculative run keeps measuring: once it has lossTime of calls whose
// rate is clearly below the plain rate (lossMargin), it pauses at once
// instead of running out runTokens (the draft stopped matching, or the
// probe that let it run was lucky).
type specGovernor struct {
	now        func() time.Time
	probeCalls int           // measured calls of a probe
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

	phase  govPhase
	calls  int           // calls recorded in the phase
	tokens int           // their tokens
	spent  time.Duration // their time
	winT   time.Duration // the measured calls' time (all but the first)
	winN   int           // and tokens
	// perTok holds a plain probe's measured calls' time per token (for
	// the median).
	perTok []time.Duration
	// cost is the last measured time per token of plain [0] and
	// speculative [1] decoding (0: not measured yet).
	cost         [2]time.Duration
	plainRun     int // the current plain stretch
	plainRunTime time.Duration

	open     bool
	curStart time.Time
	curSpec  bool
	curN     int

	paused int
	reason string
}

type govPhase int

const (
	probeSpec govPhase = iota
	probePlain
	runSpec
	runPlain
)

func newSpecGovernor(now func() time.Time) *specGovernor {
	if now == nil {
		now = time.Now
	}
	return &specGovernor{now: now, probeCalls: 3, probeMin: 8, probeTime: 5 * time.Millisecond,
		runTokens: 256, runTime: 250 * time.Millisecond, lossTime: 20 * time.Millisecond, lossMargin: 1.1,
		backoff: 256, minBackoff: 256, maxBackoff: 4096, backoffTime: 250 * time.Millisecond, minBackoffTime: 250 * time.Millisecond}
}

// speculate reports whether the next decode call speculates.
func (g *specGovernor) speculate() bool {
	return g.phase == probeSpec || g.phase == runSpec
}

// mark is called as a decode call starts: it closes the previous call's
// interval.
func (g *specGovernor) mark() {
	t := g.now()
	if g.open && g.curN > 0 {
		g.record(g.curSpec, g.curN, t.Sub(g.curStart))
	}
	g.open, g.curStart, g.curN = true, t, 0
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
	case probePlain:
		return g.calls+1 >= 1+g.probeCalls && g.winN+k >= g.probeMin && g.winT+next >= g.probeTime
	case runPlain:
		return g.tokens+k >= g.plainRun && g.spent+next >= g.plainRunTime
	}
	return true
}

func (g *specGovernor) record(spec bool, n int, d time.Duration) {
	if spec != g.speculate() {
		return // a call of the other mode (cannot happen: one call per decision)
	}
	g.calls++
	g.tokens += n
	g.spent += d
	if g.calls > 1 {
		g.winT += d
		g.winN += n
		if g.phase == probePlain {
			g.perTok = append(g.perTok, d/time.Duration(n))
		}
	}
	switch g.phase {
	case probeSpec:
		if g.calls >= 1+g.probeCalls && g.winT >= g.probeTime {
			g.cost[1] = g.measured()
			if g.cost[0] == 0 {
				g.enter(probePlain)
			} else {
				g.decide()
			}
		}
	case probePlain:
		if g.calls >= 1+g.probeCalls && g.winN >= g.probeMin && g.winT >= g.probeTime {
			g.cost[0] = g.median()
			g.decide()
		}
	case runSpec:
		if g.tokens >= g.runTokens && g.spent >= g.runTime {
			g.cost[1] = g.measured()
			g.enter(probePlain)
		} else if m := g.measured(); g.cost[0] > 0 && g.calls >= 1+g.probeCalls && g.winT >= g.lossTime &&
			float64(m) > g.lossMargin*float64(g.cost[0]) {
			g.cost[1] = m
			g.decide()
		}
	case runPlain:
		if g.tokens >= g.plainRun && g.spent >= g.plainRunTime {
			g.cost[0] = g.measured()
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

// median is the median time per token of a plain probe's measured calls
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

func (g *specGovernor) enter(p govPhase) {
	g.phase, g.calls, g.tokens, g.spent, g.winT, g.winN = p, 0, 0, 0, 0, 0
	g.perTok = g.perTok[:0]
}

// decide compares the last measurements: speculation runs on when it is
// at least as fast as plain decoding, else it pauses.
func (g *specGovernor) decide() {
	plain, spec := g.cost[0], g.cost[1]
	if plain == 0 || spec == 0 || spec <= plain {
		g.backoff, g.backoffTime = g.minBackoff, g.minBackoffTime
		g.enter(runSpec)
		return
	}
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
