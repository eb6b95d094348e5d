package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestUIScreenshot drives the page as a user would (model field, Load,
// prompt, Send), takes a screenshot mid-generation as an artifact
// (e2e/artifacts/ or $CORTIQ_ARTIFACTS), then presses Stop. It runs on the
// CPU engine, so the page must say plainly that WebGPU is not in use.
func TestUIScreenshot(t *testing.T) {
	needBrowser(t)
	gguf := needShared(t, "fixtures/models/stories260K.gguf")
	srv := newServer(t, map[string]string{"stories260K": gguf})
	b := newBrowser(t, false, "")
	b.open(srv.url() + "/")
	var st struct {
		Status string `json:"status"`
		Notice string `json:"notice"`
		Engine string `json:"engine"`
	}
	b.mustEval(`(async () => {
		document.getElementById("model").value = "stories260K";
		document.getElementById("load").click();
		const s = document.getElementById("status");
		for (let i = 0; i < 600 && !/failed|loaded in/.test(s.textContent); i++) await new Promise(r => setTimeout(r, 100));
		const n = document.getElementById("notice");
		return {status: s.textContent, notice: n.hidden ? "" : n.textContent, engine: document.getElementById("engine").textContent};
	})()`, &st, 2*time.Minute)
	if !strings.Contains(st.Status, "loaded in") {
		t.Fatalf("UI load: %q", st.Status)
	}
	if !strings.Contains(st.Notice, "CPU") || !strings.Contains(st.Engine, "CPU") {
		t.Errorf("without WebGPU the page should say the CPU runs: notice %q, badge %q", st.Notice, st.Engine)
	}
	// A long generation, so there is a middle to photograph.
	var started bool
	b.mustEval(`(() => {
		// The page's own event loop, watched while the Worker generates.
		window.__gap = 0;
		let last = performance.now();
		window.__gapTimer = setInterval(() => { const n = performance.now(); window.__gap = Math.max(window.__gap, n - last); last = n; }, 10);
		document.getElementById("maxTokens").value = "1500";
		document.getElementById("prompt").value = "Once upon a time";
		document.getElementById("send").click();
		return true;
	})()`, &started, time.Minute)
	var mid struct {
		Gap     float64 `json:"gap"`
		Chars   int     `json:"chars"`
		Live    bool    `json:"live"`
		Stats   string  `json:"stats"`
		StopOff bool    `json:"stopOff"`
	}
	b.mustEval(`(async () => {
		const out = () => document.querySelector(".msg.assistant");
		for (let i = 0; i < 600; i++) {
			const o = out();
			if (o && o.textContent.length > 120) break;
			await new Promise(r => setTimeout(r, 20));
		}
		const o = out();
		return {gap: window.__gap, chars: o ? o.textContent.length : 0, live: !!(o && o.classList.contains("live")),
			stats: document.getElementById("stats").textContent, stopOff: document.getElementById("stop").disabled};
	})()`, &mid, time.Minute)
	p := b.screenshot("cortiq-generating.png")
	t.Logf("screenshot %s (%d chars shown, live %v, stats %q)", p, mid.Chars, mid.Live, mid.Stats)
	if !mid.Live || mid.StopOff {
		t.Errorf("the screenshot is not mid-generation: live %v, stop disabled %v", mid.Live, mid.StopOff)
	}
	// All engine work is in the Worker: the page's timers keep firing.
	t.Logf("longest pause of the page's event loop while generating: %.0f ms", mid.Gap)
	if mid.Gap > 250 {
		t.Errorf("the page's event loop stalled for %.0f ms during generation", mid.Gap)
	}
	if !strings.Contains(mid.Stats, "tok/s") || !strings.Contains(mid.Stats, "cpu") {
		t.Errorf("stats line %q should show tok/s and the backend", mid.Stats)
	}
	var after struct {
		Stats string `json:"stats"`
		Live  bool   `json:"live"`
	}
	b.mustEval(`(async () => {
		document.getElementById("stop").click();
		for (let i = 0; i < 300 && document.querySelector(".msg.assistant.live"); i++) await new Promise(r => setTimeout(r, 20));
		return {stats: document.getElementById("stats").textContent, live: !!document.querySelector(".msg.assistant.live")};
	})()`, &after, time.Minute)
	if after.Live || !strings.Contains(after.Stats, "cancelled") {
		t.Errorf("Stop did not end the generation: live %v, stats %q", after.Live, after.Stats)
	}
	t.Logf("after stop: %s", after.Stats)
}
