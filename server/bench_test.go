package server

import (
	"context"
	"testing"
)

// BenchmarkWSGenerate measures the server's own overhead per token: one
// websocket connection, a model that costs nothing.
func BenchmarkWSGenerate(b *testing.B) {
	ts := startServer(b, Config{Logf: func(string, ...any) {}}, map[string]Model{"m": &fakeModel{}})
	c, err := Dial(context.Background(), ts.URL, "")
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	const n = 64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Generate(context.Background(), &Msg{Prompt: "bench", MaxTokens: n}, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "tok/s")
}

// BenchmarkSSEGenerate is the same through /v1/completions streaming.
func BenchmarkSSEGenerate(b *testing.B) {
	ts := startServer(b, Config{Logf: func(string, ...any) {}}, map[string]Model{"m": &fakeModel{}})
	const n = 64
	body := map[string]any{"prompt": "bench", "max_tokens": n, "temperature": 0, "stream": true}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, data := postJSON(b, ts.URL+"/v1/completions", "", body)
		if resp.StatusCode != 200 || len(data) == 0 {
			b.Fatal(resp.Status)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "tok/s")
}
