package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/engine"
)

// TestSpecMetrics: a model that speculates (n-gram lookup) gives the
// plain greedy text through the API, and /metrics counts the tokens
// drafted and accepted, with the acceptance ratio and the effective
// decode rate.
func TestSpecMetrics(t *testing.T) {
	e, name := chatFixture(t)
	req := GenRequest{Prompt: "Once upon a time", MaxTokens: 48}
	want := engineRef(t, e, req)
	if err := e.SetSpec(&engine.Spec{Mode: "ngram", Always: true}); err != nil {
		t.Fatal(err)
	}
	defer e.SetSpec(nil)
	ts := startServer(t, Config{}, map[string]Model{name: nopClose{FromEngine(e)}})
	resp, data := postJSON(t, ts.URL+"/v1/completions", "", `{"prompt":"Once upon a time","max_tokens":48,"temperature":0}`)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, data)
	}
	var out struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
	}
	jsonUnmarshal(t, data, &out)
	if len(out.Choices) != 1 || out.Choices[0].Text != want.Text {
		t.Errorf("speculative completion %+v, plain %q", out.Choices, want.Text)
	}
	mr, err := httpClient.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(mr.Body)
	mr.Body.Close()
	for _, want := range []string{"cortiq_spec_drafted_tokens_total ", "cortiq_spec_accepted_tokens_total ",
		"# TYPE cortiq_spec_acceptance_ratio gauge", "# TYPE cortiq_spec_effective_tokens_per_second gauge"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(string(body), "cortiq_spec_drafted_tokens_total 0\n") {
		t.Errorf("no drafted tokens counted:\n%s", body)
	}
}

// TestPrefixReuseMetrics: with prefix reuse on, a second completion whose
// prompt extends the first one's text prefills only its new tokens: the
// usage reports the reused ones (OpenAI's cached_tokens), /metrics counts
// them, and the text equals a cold engine's.
func TestPrefixReuseMetrics(t *testing.T) {
	cold, name := chatFixture(t)
	p := filepath.Join(sharedDir(), "fixtures", "models", name)
	if _, err := os.Stat(p); err != nil {
		p = filepath.Join(sharedDir(), "fixtures", "models", "stories260K.gguf")
	}
	e, err := engine.Load(context.Background(), nil, p, engine.Options{Backend: "cpu", PrefixCacheBytes: 1 << 28})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ts := startServer(t, Config{}, map[string]Model{name: nopClose{FromEngine(e)}})
	type out struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
		Usage struct {
			Prompt  int `json:"prompt_tokens"`
			Details *struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	complete := func(prompt string) out {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"prompt": prompt, "max_tokens": 16, "temperature": 0})
		resp, data := postJSON(t, ts.URL+"/v1/completions", "", string(body))
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, data)
		}
		var o out
		jsonUnmarshal(t, data, &o)
		return o
	}
	first := complete("Once upon a time")
	if first.Usage.Details != nil {
		t.Errorf("first request reused %d tokens", first.Usage.Details.Cached)
	}
	p2 := "Once upon a time" + first.Choices[0].Text + " One day"
	second := complete(p2)
	if second.Usage.Details == nil || second.Usage.Details.Cached < first.Usage.Prompt {
		t.Fatalf("second request: usage %+v, want at least the first prompt's %d tokens reused", second.Usage, first.Usage.Prompt)
	}
	want := engineRef(t, cold, GenRequest{Prompt: p2, MaxTokens: 16})
	if second.Choices[0].Text != want.Text {
		t.Errorf("reused-prefix text %q, cold %q", second.Choices[0].Text, want.Text)
	}
	mr, err := httpClient.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(mr.Body)
	mr.Body.Close()
	if line := fmt.Sprintf("cortiq_prompt_tokens_reused_total %d\n", second.Usage.Details.Cached); !strings.Contains(string(body), line) {
		t.Errorf("metrics lack %q", line)
	}
}
