package server

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// The official openai npm client against cortiq serve: non-streaming and
// streaming chat completions (and a completion) on a fixture model, greedy
// output equal to the engine's own (what cortiq run --temp 0 prints).
const npmScript = `
import OpenAI from 'openai';
const client = new OpenAI({ baseURL: process.env.BASE_URL, apiKey: process.env.API_KEY, maxRetries: 0 });
const model = process.env.MODEL;
const messages = [{ role: 'user', content: 'Tell me a story.' }];
const r = await client.chat.completions.create({ model, messages, max_tokens: 32, temperature: 0 });
const stream = await client.chat.completions.create({ model, messages, max_tokens: 32, temperature: 0,
  stream: true, stream_options: { include_usage: true } });
let text = '', finish = null, usage = null, chunks = 0;
for await (const chunk of stream) {
  chunks++;
  if (chunk.usage) usage = chunk.usage;
  for (const c of chunk.choices) { text += c.delta?.content ?? ''; if (c.finish_reason) finish = c.finish_reason; }
}
const comp = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 32, temperature: 0 });
const models = await client.models.list();
let notFound = null;
try { await client.chat.completions.create({ model: 'no-such-model', messages }); }
catch (e) { notFound = { status: e.status, code: e.code }; }
let unauthorized = null;
try { await new OpenAI({ baseURL: process.env.BASE_URL, apiKey: 'wrong', maxRetries: 0 }).models.list(); }
catch (e) { unauthorized = { status: e.status }; }
console.log(JSON.stringify({ chat: r.choices[0].message.content, chatFinish: r.choices[0].finish_reason, usage: r.usage,
  stream: text, streamFinish: finish, streamUsage: usage, chunks, completion: comp.choices[0].text,
  models: models.data.map(m => m.id), notFound, unauthorized }));
`

// npmResult is what the node script reports.
type npmResult struct {
	Chat, ChatFinish, Stream, StreamFinish, Completion string
	Usage, StreamUsage                                 *usage
	Chunks                                             int
	Models                                             []string
	NotFound                                           *struct {
		Status int
		Code   string
	}
	Unauthorized *struct{ Status int }
}

var (
	npmOnce sync.Once
	npmDir  string
	npmSkip string
)

// npmClientDir installs the openai package once per test binary.
func npmClientDir(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("npm install: skipped with -short")
	}
	npmOnce.Do(func() {
		if _, err := exec.LookPath("node"); err != nil {
			npmSkip = "node is not installed: skipping the openai npm client test"
			return
		}
		npm, err := exec.LookPath("npm")
		if err != nil {
			npmSkip = "npm is not installed: skipping the openai npm client test"
			return
		}
		dir, err := os.MkdirTemp("", "cortiq-openai-npm-")
		if err != nil {
			npmSkip = err.Error()
			return
		}
		os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"cortiq-openai-test","private":true,"type":"module"}`), 0o644)
		os.WriteFile(filepath.Join(dir, "test.mjs"), []byte(npmScript), 0o644)
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		install := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--loglevel=error", "openai")
		install.Dir = dir
		if out, err := install.CombinedOutput(); err != nil {
			npmSkip = fmt.Sprintf("npm install openai failed (no registry access?): %v\n%s", err, out)
			os.RemoveAll(dir)
			return
		}
		npmDir = dir
	})
	if npmSkip != "" {
		t.Skip(npmSkip)
	}
	return npmDir
}

// runNpmClient runs the node script against ts, serving model with token.
func runNpmClient(t *testing.T, ts *testServer, model, token string) *npmResult {
	t.Helper()
	dir := npmClientDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := exec.CommandContext(ctx, "node", "test.mjs")
	run.Dir = dir
	run.Env = append(os.Environ(), "BASE_URL="+ts.URL+"/v1", "API_KEY="+token, "MODEL="+model)
	out, err := run.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("node: %v\n%s\n%s", err, out, stderr)
	}
	var got npmResult
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node output %s: %v", out, err)
	}
	if len(got.Models) != 1 || got.Models[0] != model {
		t.Errorf("models %v", got.Models)
	}
	if got.NotFound == nil || got.NotFound.Status != 404 || got.NotFound.Code != "model_not_found" {
		t.Errorf("unknown model through the client: %+v", got.NotFound)
	}
	if got.Unauthorized == nil || got.Unauthorized.Status != 401 {
		t.Errorf("wrong key through the client: %+v", got.Unauthorized)
	}
	if got.StreamUsage == nil || got.Usage == nil || *got.StreamUsage != *got.Usage {
		t.Errorf("usage %+v, stream usage %+v", got.Usage, got.StreamUsage)
	}
	if got.StreamFinish != got.ChatFinish {
		t.Errorf("finish reasons %q (plain) %q (stream)", got.ChatFinish, got.StreamFinish)
	}
	t.Logf("openai npm client: %d stream chunks, chat %q", got.Chunks, got.Chat)
	return &got
}

// TestOpenAINpmClientFake checks the wire format with the official client
// on the fake model (the engine test below checks the output).
func TestOpenAINpmClientFake(t *testing.T) {
	fm := &fakeModel{eosAt: 20}
	ts := startServer(t, Config{Token: "tok"}, map[string]Model{"fake": fm})
	got := runNpmClient(t, ts, "fake", "tok")
	msgs := []ChatMessage{{"user", "Tell me a story."}}
	want := reference(t, fm, GenRequest{Messages: msgs, MaxTokens: 32})
	if got.Chat != want.Text || got.Stream != want.Text || got.ChatFinish != "stop" || got.Usage.CompletionTokens != 20 {
		t.Errorf("chat %q / stream %q (%s, %+v), want %q", got.Chat, got.Stream, got.ChatFinish, got.Usage, want.Text)
	}
	if wc := reference(t, fm, GenRequest{Prompt: "Once upon a time", MaxTokens: 32}); got.Completion != wc.Text {
		t.Errorf("completion %q, want %q", got.Completion, wc.Text)
	}
}
