package server

import (
	"context"
	"math"
	"testing"
)

// TestMaxTokensHugeIsClamped: max_tokens near 2^63 runs to the end of the
// context and returns what it generated ("length"), over HTTP and the
// websocket alike, instead of failing after generating it all.
func TestMaxTokensHugeIsClamped(t *testing.T) {
	e := loadFixture(t, "fixtures/tiny/llama")
	ts := startServer(t, Config{}, map[string]Model{"llama": nopClose{FromEngine(e)}})
	prompt := []int{1, 17, 42, 99, 7}
	want := engineRef(t, e, GenRequest{IDs: prompt, IgnoreEOS: true}) // 0 = to the end of the context
	resp, data := postJSON(t, ts.URL+"/v1/completions", "", map[string]any{"prompt": prompt, "max_tokens": math.MaxInt64, "temperature": 0, "ignore_eos": true})
	if resp.StatusCode != 200 {
		t.Fatalf("HTTP: %d %s", resp.StatusCode, data)
	}
	var out struct {
		Usage   usage
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		}
	}
	jsonUnmarshal(t, data, &out)
	if out.Usage.CompletionTokens != len(want.IDs) || len(out.Choices) != 1 || out.Choices[0].FinishReason != "length" {
		t.Errorf("HTTP: %s; want %d tokens, finish length", data, len(want.IDs))
	}
	c, err := Dial(context.Background(), ts.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.Generate(context.Background(), &Msg{IDs: prompt, MaxTokens: math.MaxInt64, IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatalf("websocket: %v", err)
	}
	if len(res.IDs) != len(want.IDs) || res.FinishReason != "length" {
		t.Errorf("websocket: %d tokens, finish %q; want %d, length", len(res.IDs), res.FinishReason, len(want.IDs))
	}
}
