package server

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// metrics are written in Prometheus' text exposition format by hand: the
// set is small and fixed, and a client library would be a dependency for
// a few counters.
type metrics struct {
	mu       sync.Mutex
	requests map[[2]string]int64 // endpoint, status code
	finishes map[string]int64    // finish reason

	tokens       atomic.Int64
	promptTokens atomic.Int64
	rejected     atomic.Int64
	wsConns      atomic.Int64
	wsDropped    atomic.Int64
	connsRefused atomic.Int64

	ttft    *histogram
	latency *histogram

	// Speculative decoding: tokens drafted and accepted, and the decode
	// rate of the latest speculative generation (bits of a float64).
	specDrafted, specAccepted atomic.Int64
	specTokS                  atomic.Uint64

	cachedTokens atomic.Int64 // prompt tokens served from kept sessions
}

// spec records a finished generation's speculative decoding.
func (m *metrics) spec(res *Result) {
	if res == nil || res.Spec == nil {
		return
	}
	m.specDrafted.Add(int64(res.Spec.Drafted))
	m.specAccepted.Add(int64(res.Spec.Accepted))
	m.specTokS.Store(math.Float64bits(res.Spec.EffectiveTokS))
}

func newMetrics() *metrics {
	return &metrics{
		requests: map[[2]string]int64{},
		finishes: map[string]int64{},
		ttft:     newHistogram(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
		latency:  newHistogram(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
	}
}

func (m *metrics) request(endpoint string, code int) {
	m.mu.Lock()
	m.requests[[2]string{endpoint, itoa(int64(code))}]++
	m.mu.Unlock()
}

func (m *metrics) finished(reason string) {
	m.mu.Lock()
	m.finishes[reason]++
	m.mu.Unlock()
}

type histogram struct {
	mu     sync.Mutex
	bounds []float64
	counts []int64 // per bucket, not cumulative; the last is +Inf
	sum    float64
	n      int64
}

func newHistogram(bounds ...float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]int64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i, _ := slices.BinarySearch(h.bounds, v)
	h.mu.Lock()
	h.counts[i]++
	h.sum += v
	h.n++
	h.mu.Unlock()
}

func (h *histogram) write(b *strings.Builder, name, help string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	var cum int64
	for i, ub := range h.bounds {
		cum += h.counts[i]
		fmt.Fprintf(b, "%s_bucket{le=\"%s\"} %d\n", name, fmtFloat(ub), cum)
	}
	cum += h.counts[len(h.bounds)]
	fmt.Fprintf(b, "%s_bucket{le=\"+Inf\"} %d\n%s_sum %s\n%s_count %d\n", name, cum, name, fmtFloat(h.sum), name, h.n)
}

func fmtFloat(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return fmt.Sprintf("%g", v)
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	m := s.metrics
	var b strings.Builder
	counter := func(name, help string, v int64) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", name, help, name, name, v)
	}
	gauge := func(name, help string, v int64) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n%s %d\n", name, help, name, name, v)
	}
	m.mu.Lock()
	b.WriteString("# HELP cortiq_http_requests_total HTTP API requests by endpoint and status code.\n# TYPE cortiq_http_requests_total counter\n")
	keys := make([][2]string, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return strings.Compare(a[0]+" "+a[1], b[0]+" "+b[1]) })
	for _, k := range keys {
		fmt.Fprintf(&b, "cortiq_http_requests_total{endpoint=%q,code=%q} %d\n", k[0], k[1], m.requests[k])
	}
	b.WriteString("# HELP cortiq_generations_total Finished generations by finish reason.\n# TYPE cortiq_generations_total counter\n")
	reasons := make([]string, 0, len(m.finishes))
	for k := range m.finishes {
		reasons = append(reasons, k)
	}
	slices.Sort(reasons)
	for _, k := range reasons {
		fmt.Fprintf(&b, "cortiq_generations_total{finish_reason=%q} %d\n", k, m.finishes[k])
	}
	m.mu.Unlock()
	counter("cortiq_generated_tokens_total", "Tokens generated.", m.tokens.Load())
	counter("cortiq_prompt_tokens_total", "Prompt tokens processed.", m.promptTokens.Load())
	counter("cortiq_prompt_tokens_reused_total", "Prompt tokens a kept session already held (prefix reuse): not prefilled again.", m.cachedTokens.Load())
	counter("cortiq_rejected_generations_total", "Generations refused because the server was at its limit.", m.rejected.Load())
	counter("cortiq_websocket_dropped_total", "Websocket connections dropped for being too slow or misbehaving.", m.wsDropped.Load())
	counter("cortiq_connections_refused_total", "Connections refused because too many were not authenticated yet.", m.connsRefused.Load())
	gauge("cortiq_active_generations", "Generations in flight.", s.active.Load())
	gauge("cortiq_websocket_connections", "Open websocket connections.", m.wsConns.Load())
	gauge("cortiq_workers", "Registered workers.", int64(len(s.Workers())))
	drafted, accepted := m.specDrafted.Load(), m.specAccepted.Load()
	counter("cortiq_spec_drafted_tokens_total", "Tokens proposed by speculative decoding (n-gram lookup or a draft model).", drafted)
	counter("cortiq_spec_accepted_tokens_total", "Proposed tokens the target model accepted.", accepted)
	rate := 0.0
	if drafted > 0 {
		rate = float64(accepted) / float64(drafted)
	}
	fmt.Fprintf(&b, "# HELP cortiq_spec_acceptance_ratio Accepted over drafted tokens since start.\n# TYPE cortiq_spec_acceptance_ratio gauge\ncortiq_spec_acceptance_ratio %s\n", fmtFloat(rate))
	fmt.Fprintf(&b, "# HELP cortiq_spec_effective_tokens_per_second Decode rate of the latest speculative generation.\n# TYPE cortiq_spec_effective_tokens_per_second gauge\ncortiq_spec_effective_tokens_per_second %s\n", fmtFloat(math.Float64frombits(m.specTokS.Load())))
	m.ttft.write(&b, "cortiq_time_to_first_token_seconds", "Time from admission to the first generated token.")
	m.latency.write(&b, "cortiq_generation_duration_seconds", "Time from admission to the end of a generation.")
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write([]byte(b.String()))
}
