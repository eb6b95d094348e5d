package server

import (
	"io"
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
	if err := e.SetSpec(&engine.Spec{Mode: "ngram"}); err != nil {
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
