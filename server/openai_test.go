package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cortiq/cortiq/sample"
)

type oaErr struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func decodeErr(t *testing.T, data []byte) oaErr {
	t.Helper()
	var e oaErr
	if err := json.Unmarshal(data, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("not an OpenAI error body: %s (%v)", data, err)
	}
	return e
}

func TestCheckBind(t *testing.T) {
	for _, c := range []struct {
		addr, token string
		ok          bool
	}{
		{"127.0.0.1:8080", "", true},
		{"[::1]:8080", "", true},
		{"localhost:8080", "", true},
		{"127.0.0.2:1", "", true},
		{"0.0.0.0:8080", "", false},
		{":8080", "", false},
		{"192.168.1.2:8080", "", false},
		{"0.0.0.0:8080", "secret", true},
		{"nonsense", "", false},
	} {
		err := CheckBind(c.addr, c.token)
		if (err == nil) != c.ok {
			t.Errorf("CheckBind(%q, %q) = %v, want ok=%v", c.addr, c.token, err, c.ok)
		}
	}
	s, _ := New(Config{})
	if err := s.ListenAndServe("0.0.0.0:0"); err == nil || !strings.Contains(err.Error(), "--token") {
		t.Fatalf("ListenAndServe off loopback without a token: %v, want a refusal naming --token", err)
	}
}

func TestModelName(t *testing.T) {
	for in, want := range map[string]string{
		"/a/b/stories260K.gguf": "stories260K", "/a/b/llama/": "llama", "x.cmf": "x", "/m/tiny/config.json": "tiny",
	} {
		if got := ModelName(in); got != want {
			t.Errorf("ModelName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestModelsEndpoint(t *testing.T) {
	ts := startServer(t, Config{}, map[string]Model{"alpha": &fakeModel{}, "beta": &fakeModel{}})
	resp, err := httpClient.Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Object string `json:"object"`
		Data   []struct {
			ID, Object, OwnedBy string
		} `json:"data"`
	}
	json.NewDecoder(resp.Body).Decode(&out)
	if out.Object != "list" || len(out.Data) != 2 || out.Data[0].ID != "alpha" || out.Data[1].ID != "beta" || out.Data[0].Object != "model" {
		t.Fatalf("models = %+v", out)
	}
}

func TestCompletionsNonStreaming(t *testing.T) {
	fm := &fakeModel{}
	ts := startServer(t, Config{}, map[string]Model{"m": fm})
	resp, data := postJSON(t, ts.URL+"/v1/completions", "", map[string]any{
		"model": "m", "prompt": "hello", "max_tokens": 5, "temperature": 0,
	})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	var out struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		Model   string `json:"model"`
		Choices []struct {
			Text         string  `json:"text"`
			Index        int     `json:"index"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *usage `json:"usage"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	want := reference(t, fm, GenRequest{Prompt: "hello", MaxTokens: 5})
	if !strings.HasPrefix(out.ID, "cmpl-") || out.Object != "text_completion" || out.Model != "m" || out.Created == 0 {
		t.Errorf("envelope: %s", data)
	}
	if len(out.Choices) != 1 || out.Choices[0].Text != want.Text || *out.Choices[0].FinishReason != "length" {
		t.Errorf("choices: %s, want text %q", data, want.Text)
	}
	if out.Usage == nil || out.Usage.PromptTokens != 5 || out.Usage.CompletionTokens != 5 || out.Usage.TotalTokens != 10 {
		t.Errorf("usage: %s", data)
	}

	// Token-id prompts, default model.
	resp, data = postJSON(t, ts.URL+"/v1/completions", "", `{"prompt":[[1,2,3]],"max_tokens":3,"temperature":0}`)
	if resp.StatusCode != 200 || !strings.Contains(data2text(t, data), reference(t, fm, GenRequest{IDs: []int{1, 2, 3}, MaxTokens: 3}).Text) {
		t.Errorf("ids prompt: %d %s", resp.StatusCode, data)
	}
}

func data2text(t *testing.T, data []byte) string {
	var out struct {
		Choices []struct {
			Text    string `json:"text"`
			Message struct {
				Role, Content string
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(data, &out); err != nil || len(out.Choices) != 1 {
		t.Fatalf("bad response %s", data)
	}
	return out.Choices[0].Text + out.Choices[0].Message.Content
}

func TestChatNonStreaming(t *testing.T) {
	fm := &fakeModel{eosAt: 3}
	ts := startServer(t, Config{}, map[string]Model{"m": fm})
	msgs := []map[string]any{
		{"role": "system", "content": "be brief"},
		{"role": "user", "content": []map[string]string{{"type": "text", "text": "hi "}, {"type": "text", "text": "there"}}},
	}
	resp, data := postJSON(t, ts.URL+"/v1/chat/completions", "", map[string]any{"model": "m", "messages": msgs, "temperature": 0, "seed": 7})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	var out struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Choices []struct {
			Message      ChatMessage `json:"message"`
			FinishReason string      `json:"finish_reason"`
		} `json:"choices"`
		Usage usage `json:"usage"`
	}
	json.Unmarshal(data, &out)
	want := reference(t, fm, GenRequest{Messages: []ChatMessage{{"system", "be brief"}, {"user", "hi there"}}})
	if !strings.HasPrefix(out.ID, "chatcmpl-") || out.Object != "chat.completion" || len(out.Choices) != 1 {
		t.Fatalf("envelope: %s", data)
	}
	c := out.Choices[0]
	if c.Message.Role != "assistant" || c.Message.Content != want.Text || c.FinishReason != "stop" {
		t.Errorf("choice %+v, want content %q finish stop (eos)", c, want.Text)
	}
	if out.Usage.CompletionTokens != 3 {
		t.Errorf("usage %+v", out.Usage)
	}
}

type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index        int                             `json:"index"`
		Text         string                          `json:"text"`
		Delta        *struct{ Role, Content string } `json:"delta"`
		FinishReason *string                         `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

// streamText runs a streaming request and returns the concatenated text,
// the finish reason and the usage chunk (nil if none), checking the chunk
// shapes on the way.
func streamText(t *testing.T, url string, body map[string]any, chat bool) (string, string, *usage) {
	t.Helper()
	data, _ := json.Marshal(body)
	resp, err := httpClient.Post(url, "application/json", strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("content type %q", ct)
	}
	events := sseEvents(t, resp.Body)
	if len(events) == 0 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %q", events)
	}
	var text, finish string
	var u *usage
	var id string
	for i, e := range events[:len(events)-1] {
		var c chunk
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			t.Fatalf("chunk %d %q: %v", i, e, err)
		}
		if id == "" {
			id = c.ID
		} else if c.ID != id {
			t.Errorf("chunk ids differ: %q %q", id, c.ID)
		}
		wantObj := "text_completion"
		if chat {
			wantObj = "chat.completion.chunk"
		}
		if c.Object != wantObj {
			t.Errorf("chunk object %q, want %q", c.Object, wantObj)
		}
		if c.Usage != nil {
			if len(c.Choices) != 0 || u != nil {
				t.Errorf("usage chunk must have no choices and come once: %s", e)
			}
			u = c.Usage
			continue
		}
		if u != nil {
			t.Errorf("chunk after the usage chunk: %s", e)
		}
		if len(c.Choices) != 1 {
			t.Fatalf("chunk with %d choices: %s", len(c.Choices), e)
		}
		ch := c.Choices[0]
		if finish != "" {
			t.Errorf("chunk after the finish chunk: %s", e)
		}
		if chat {
			if ch.Delta == nil {
				t.Fatalf("chat chunk without delta: %s", e)
			}
			if i == 0 && ch.Delta.Role != "assistant" {
				t.Errorf("first chat chunk must carry the role: %s", e)
			}
			text += ch.Delta.Content
		} else {
			text += ch.Text
		}
		if ch.FinishReason != nil {
			finish = *ch.FinishReason
		}
	}
	if finish == "" {
		t.Errorf("no finish_reason in the stream")
	}
	return text, finish, u
}

func TestStreaming(t *testing.T) {
	fm := &fakeModel{}
	ts := startServer(t, Config{}, map[string]Model{"m": fm})
	want := reference(t, fm, GenRequest{Prompt: "abc", MaxTokens: 7})
	text, finish, u := streamText(t, ts.URL+"/v1/completions", map[string]any{
		"prompt": "abc", "max_tokens": 7, "temperature": 0, "stream": true, "stream_options": map[string]any{"include_usage": true},
	}, false)
	if text != want.Text || finish != "length" || u == nil || u.CompletionTokens != 7 || u.PromptTokens != 3 {
		t.Errorf("completions stream: %q %q %+v, want %q", text, finish, u, want.Text)
	}
	msgs := []ChatMessage{{"user", "x"}}
	want = reference(t, fm, GenRequest{Messages: msgs, MaxTokens: 4})
	text, finish, u = streamText(t, ts.URL+"/v1/chat/completions", map[string]any{
		"messages": msgs, "max_completion_tokens": 4, "temperature": 0, "stream": true,
	}, true)
	if text != want.Text || finish != "length" || u != nil {
		t.Errorf("chat stream: %q %q %+v, want %q and no usage chunk", text, finish, u, want.Text)
	}
	// Stop strings cut the text.
	full := reference(t, fm, GenRequest{Prompt: "abc", MaxTokens: 7}).Text
	stop := strings.Fields(full)[2]
	text, finish, _ = streamText(t, ts.URL+"/v1/completions", map[string]any{
		"prompt": "abc", "max_tokens": 7, "temperature": 0, "stream": true, "stop": []string{"zzz", stop},
	}, false)
	if finish != "stop" || text != full[:strings.Index(full, stop)] {
		t.Errorf("stop %q: got %q %q from %q", stop, text, finish, full)
	}
}

func TestSamplingParamsReachTheModel(t *testing.T) {
	var got GenRequest
	m := &recordModel{fakeModel: &fakeModel{}, got: &got}
	ts := startServer(t, Config{}, map[string]Model{"m": m})
	resp, data := postJSON(t, ts.URL+"/v1/completions", "", map[string]any{
		"prompt": "p", "max_tokens": 2, "temperature": 0.5, "top_p": 0.9, "top_k": 7, "min_p": 0.1,
		"repetition_penalty": 1.1, "presence_penalty": 0.2, "frequency_penalty": 0.3, "seed": 42, "stop": "x", "n": 1,
	})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, data)
	}
	want := sample.Params{Temperature: 0.5, TopP: 0.9, TopK: 7, MinP: 0.1, RepeatPenalty: 1.1, PresencePenalty: 0.2,
		FrequencyPenalty: 0.3, RepeatLastN: 64, Seed: 42}
	if got.Sampling != want || len(got.Stop) != 1 || got.Stop[0] != "x" || got.MaxTokens != 2 {
		t.Errorf("request reached the model as %+v, want sampling %+v", got, want)
	}
}

type recordModel struct {
	*fakeModel
	got *GenRequest
}

func (r *recordModel) Generate(ctx context.Context, req GenRequest, onToken func(Token) error) (*Result, error) {
	*r.got = req
	return r.fakeModel.Generate(ctx, req, onToken)
}

func TestHTTPErrors(t *testing.T) {
	ts := startServer(t, Config{Token: "sekret", MaxBodyBytes: 1 << 10}, map[string]Model{"m": &fakeModel{}})
	for _, c := range []struct {
		name, path, token string
		body              any
		status            int
		code, param       string
	}{
		{"no token", "/v1/completions", "", `{"prompt":"x"}`, 401, "invalid_api_key", ""},
		{"wrong token", "/v1/completions", "sekreT", `{"prompt":"x"}`, 401, "invalid_api_key", ""},
		{"n=2", "/v1/completions", "sekret", `{"prompt":"x","n":2}`, 400, "", "n"},
		{"unknown model", "/v1/chat/completions", "sekret", `{"model":"nope","messages":[{"role":"user","content":"x"}]}`, 404, "model_not_found", "model"},
		{"bad json", "/v1/completions", "sekret", `{"prompt":`, 400, "", ""},
		{"no prompt", "/v1/completions", "sekret", `{}`, 400, "", "prompt"},
		{"no messages", "/v1/chat/completions", "sekret", `{"prompt":"x"}`, 400, "", "messages"},
		{"bad role", "/v1/chat/completions", "sekret", `{"messages":[{"role":"wizard","content":"x"}]}`, 400, "", "messages[0].role"},
		{"image part", "/v1/chat/completions", "sekret", `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, 400, "", "messages[0].content"},
		{"negative max", "/v1/completions", "sekret", `{"prompt":"x","max_tokens":-1}`, 400, "", "max_tokens"},
		{"bad temperature", "/v1/completions", "sekret", `{"prompt":"x","temperature":-1}`, 400, "", "temperature"},
		{"bad stop", "/v1/completions", "sekret", `{"prompt":"x","stop":5}`, 400, "", "stop"},
		{"too large", "/v1/completions", "sekret", `{"prompt":"` + strings.Repeat("a", 2000) + `"}`, 413, "request_too_large", ""},
	} {
		resp, data := postJSON(t, ts.URL+c.path, c.token, c.body)
		if resp.StatusCode != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, resp.StatusCode, c.status, data)
			continue
		}
		e := decodeErr(t, data)
		if c.code != "" && (e.Error.Code == nil || *e.Error.Code != c.code) {
			t.Errorf("%s: code %v, want %q: %s", c.name, e.Error.Code, c.code, data)
		}
		if c.param != "" && (e.Error.Param == nil || *e.Error.Param != c.param) {
			t.Errorf("%s: param %v, want %q: %s", c.name, e.Error.Param, c.param, data)
		}
	}
	// The right token works; /healthz needs none; /metrics does.
	if resp, data := postJSON(t, ts.URL+"/v1/completions", "sekret", `{"prompt":"x","max_tokens":1}`); resp.StatusCode != 200 {
		t.Errorf("right token: %d %s", resp.StatusCode, data)
	}
	if resp, err := httpClient.Get(ts.URL + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("healthz: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if resp, err := httpClient.Get(ts.URL + "/metrics"); err != nil || resp.StatusCode != 401 {
		t.Errorf("metrics without token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

func TestTotalLimit(t *testing.T) {
	fm := &fakeModel{delay: 20 * time.Millisecond, started: make(chan struct{}, 1)}
	ts := startServer(t, Config{MaxActive: 1}, map[string]Model{"m": fm})
	done := make(chan struct{})
	go func() {
		defer close(done)
		postJSON(t, ts.URL+"/v1/completions", "", `{"prompt":"x","max_tokens":20}`)
	}()
	<-fm.started
	resp, data := postJSON(t, ts.URL+"/v1/completions", "", `{"prompt":"y","max_tokens":1}`)
	if resp.StatusCode != 429 {
		t.Errorf("second generation over the limit: %d %s, want 429", resp.StatusCode, data)
	} else {
		decodeErr(t, data)
	}
	<-done
}

func TestMetricsAndFiles(t *testing.T) {
	dir := t.TempDir()
	content := []byte(strings.Repeat("0123456789", 100))
	os.WriteFile(filepath.Join(dir, "model.safetensors"), content, 0o644)
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{}`), 0o644)
	ts := startServer(t, Config{}, nil)
	ts.AddModel("tiny", dir, &fakeModel{})
	postJSON(t, ts.URL+"/v1/completions", "", `{"prompt":"x","max_tokens":3}`)

	resp, err := httpClient.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`cortiq_http_requests_total{endpoint="completions",code="200"} 1`,
		"cortiq_generated_tokens_total 3", "cortiq_active_generations 0",
		`cortiq_time_to_first_token_seconds_bucket{le="+Inf"} 1`, "cortiq_generation_duration_seconds_count 1",
		"# TYPE cortiq_time_to_first_token_seconds histogram",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}

	req, _ := http.NewRequest("GET", ts.URL+"/models/tiny/model.safetensors", nil)
	req.Header.Set("Range", "bytes=10-19")
	resp, err = httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	etag := resp.Header.Get("ETag")
	if resp.StatusCode != 206 || string(body) != "0123456789" || etag == "" {
		t.Errorf("range: %d %q etag %q", resp.StatusCode, body, etag)
	}
	req, _ = http.NewRequest("GET", ts.URL+"/models/tiny/model.safetensors", nil)
	req.Header.Set("If-None-Match", etag)
	if resp, err = httpClient.Do(req); err != nil || resp.StatusCode != 304 {
		t.Errorf("If-None-Match: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	for _, p := range []string{"/models/tiny/../../etc/passwd", "/models/tiny/%2e%2e/x", "/models/nope/config.json", "/models/tiny/missing"} {
		if resp, err := httpClient.Get(ts.URL + p); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				t.Errorf("%s: 200", p)
			}
		}
	}
	resp, err = httpClient.Get(ts.URL + "/models/tiny/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"name":"model.safetensors","size":1000`) {
		t.Errorf("listing: %s", body)
	}
}

func TestSSESlowOrGoneClient(t *testing.T) {
	fm := &fakeModel{}
	ts := startServer(t, Config{WriteTimeout: 500 * time.Millisecond}, map[string]Model{"m": fm})
	waitIdle := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ts.active.Load() != 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: generation still running", what)
			}
		}
	}
	// A client that stops reading: the socket fills, a write times out,
	// the generation ends.
	conn, err := net.Dial("tcp", ts.Addr)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"prompt":"flood","max_tokens":5000000,"stream":true}`
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	for deadline := time.Now().Add(10 * time.Second); ts.active.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("generation never started")
		}
	}
	waitIdle("client not reading")
	conn.Close()
	// A client that goes away: its generation is cancelled.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/completions", strings.NewReader(body))
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadFull(resp.Body, make([]byte, 100))
	cancel()
	resp.Body.Close()
	waitIdle("client gone")
	// Others are served.
	if resp, data := postJSON(t, ts.URL+"/v1/completions", "", `{"prompt":"x","max_tokens":2}`); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, data)
	}
}

func TestStaticWeb(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "index.html"), []byte("<h1>cortiq</h1>"), 0o644)
	ts := startServer(t, Config{WebDir: dir, Token: "t"}, map[string]Model{"m": &fakeModel{}})
	resp, err := httpClient.Get(ts.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "<h1>cortiq</h1>" {
		t.Errorf("GET / = %d %q", resp.StatusCode, b)
	}
	if _, err := New(Config{WebDir: filepath.Join(dir, "missing")}); err == nil {
		t.Errorf("a missing web directory was accepted")
	}
}

func TestDNSRebindingGuard(t *testing.T) {
	for _, c := range []struct {
		token, host string
		status      int
	}{
		{"", "127.0.0.1:8080", 200}, {"", "localhost:8080", 200}, {"", "[::1]:8080", 200}, {"", "app.localhost", 200},
		{"", "evil.example:8080", 421}, {"", "192.168.0.2", 421}, {"tok", "evil.example:8080", 200},
	} {
		s, err := New(Config{Token: c.token})
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest("GET", "/healthz", nil)
		req.Host = c.host
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		if rec.Code != c.status {
			t.Errorf("token %q host %q: %d, want %d", c.token, c.host, rec.Code, c.status)
		}
	}
}
