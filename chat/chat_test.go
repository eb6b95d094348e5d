package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cortiq/cortiq/gguf"
	"github.com/cortiq/cortiq/tokenizer"
)

var (
	withSystem = []Message{
		{Role: "system", Content: "You are helpful."},
		{Role: "user", Content: "Hi there"},
		{Role: "assistant", Content: "Hello! How can I help?"},
		{Role: "user", Content: "Tell me a joke."},
	}
	noSystem = withSystem[1:]

	weatherTool = json.RawMessage(`{"type": "function", "function": {"name": "get_weather", "description": "Get weather",
		"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}`)
	toolConversation = []Message{
		{Role: "user", Content: "Weather in Paris?"},
		{Role: "assistant", ToolCalls: []ToolCall{{Name: "get_weather", Arguments: json.RawMessage(`{"city": "Paris"}`)}}},
		{Role: "tool", Content: `{"temp": 20}`},
	}
)

func readTemplate(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestTemplates(t *testing.T) {
	const qwenSys = "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
	const chatmlTurns = "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\nHello! How can I help?<|im_end|>\n<|im_start|>user\nTell me a joke.<|im_end|>\n"
	const llama3Turns = "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello! How can I help?<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nTell me a joke.<|eot_id|>"
	const tool4 = "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\",\n        \"description\": \"Get weather\",\n        \"parameters\": {\n            \"type\": \"object\",\n            \"properties\": {\n                \"city\": {\n                    \"type\": \"string\"\n                }\n            },\n            \"required\": [\n                \"city\"\n            ]\n        }\n    }\n}"
	gen := Options{AddGenerationPrompt: true}
	cases := []struct {
		name     string
		template string
		messages []Message
		opts     Options
		want     string
		wantErr  string
	}{
		{name: "qwen2.5/system", template: "qwen2.5.jinja", messages: withSystem, opts: gen,
			want: "<|im_start|>system\nYou are helpful.<|im_end|>\n" + chatmlTurns + "<|im_start|>assistant\n"},
		{name: "qwen2.5/default-system", template: "qwen2.5.jinja", messages: noSystem, opts: Options{},
			want: qwenSys + chatmlTurns},
		{name: "qwen2.5/tools", template: "qwen2.5.jinja", messages: toolConversation,
			opts: Options{AddGenerationPrompt: true, Tools: []any{weatherTool}},
			want: "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
				`{"type": "function", "function": {"name": "get_weather", "description": "Get weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}` +
				"\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" +
				"<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n" +
				"<|im_start|>user\n<tool_response>\n{\"temp\": 20}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"},
		{name: "smollm2/system", template: "smollm2.jinja", messages: withSystem, opts: gen,
			want: "<|im_start|>system\nYou are helpful.<|im_end|>\n" + chatmlTurns + "<|im_start|>assistant\n"},
		{name: "smollm2/default-system", template: "smollm2.jinja", messages: noSystem, opts: gen,
			want: "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n" + chatmlTurns + "<|im_start|>assistant\n"},
		{name: "llama3.1/plain", template: "llama3.1.jinja", messages: withSystem,
			opts: Options{AddGenerationPrompt: true, BOSToken: "<|begin_of_text|>"},
			want: "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nYou are helpful.<|eot_id|>" +
				llama3Turns + "<|start_header_id|>assistant<|end_header_id|>\n\n"},
		{name: "llama3.1/tools", template: "llama3.1.jinja",
			messages: append([]Message{{Role: "system", Content: "You are helpful."}}, append(toolConversation[:2:2], Message{Role: "tool", Content: "20 degrees"})...),
			opts:     Options{AddGenerationPrompt: true, BOSToken: "<|begin_of_text|>", Tools: []any{weatherTool}},
			want: "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nYou are helpful.<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\n" +
				`Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.Do not use variables.` + "\n\n" + tool4 + "\n\nWeather in Paris?<|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}<|eot_id|>" +
				// A string is iterable in Python, so the template JSON-quotes it.
				"<|start_header_id|>ipython<|end_header_id|>\n\n\"20 degrees\"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		{name: "llama3.2/strftime", template: "llama3.2-date.jinja", messages: noSystem[:1],
			opts: Options{AddGenerationPrompt: true, BOSToken: "<|begin_of_text|>", Now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)},
			want: "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 30 Nov 2026\n\n<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		{name: "llama2/system", template: "llama2.jinja", messages: withSystem, opts: Options{BOSToken: "<s>", EOSToken: "</s>"},
			want: "<s>[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\nHi there [/INST] Hello! How can I help? </s><s>[INST] Tell me a joke. [/INST]"},
		{name: "llama2/no-system", template: "llama2.jinja", messages: noSystem, opts: Options{BOSToken: "<s>", EOSToken: "</s>"},
			want: "<s>[INST] Hi there [/INST] Hello! How can I help? </s><s>[INST] Tell me a joke. [/INST]"},
		{name: "llama2/alternation", template: "llama2.jinja", messages: []Message{{Role: "user", Content: "a"}, {Role: "user", Content: "b"}},
			wantErr: "Conversation roles must alternate user/assistant/user/assistant/..."},
		{name: "gemma", template: "gemma.jinja", messages: noSystem, opts: Options{AddGenerationPrompt: true, BOSToken: "<bos>"},
			want: "<bos><start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\nHello! How can I help?<end_of_turn>\n<start_of_turn>user\nTell me a joke.<end_of_turn>\n<start_of_turn>model\n"},
		{name: "gemma/system", template: "gemma.jinja", messages: withSystem, wantErr: "System role not supported"},
		{name: "phi3", template: "phi3.jinja", messages: withSystem, opts: Options{EOSToken: "<|endoftext|>"},
			want: "<|system|>\nYou are helpful.<|end|>\n<|user|>\nHi there<|end|>\n<|assistant|>\nHello! How can I help?<|end|>\n<|user|>\nTell me a joke.<|end|>\n<|endoftext|>"},
		{name: "phi3/gen", template: "phi3.jinja", messages: noSystem, opts: gen,
			want: "<|user|>\nHi there<|end|>\n<|assistant|>\nHello! How can I help?<|end|>\n<|user|>\nTell me a joke.<|end|>\n<|assistant|>\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Render(readTemplate(t, c.template), c.messages, c.opts)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("got\n%q\nwant\n%q", got, c.want)
			}
		})
	}
}

// TestFixtureTemplates renders every chat template the shared fixtures
// carry (Phi-3's GGUF template).
func TestFixtureTemplates(t *testing.T) {
	shared, _ := filepath.Abs(filepath.Join("..", "..", "shared"))
	path := filepath.Join(shared, "fixtures", "llama-cpp-vocab", "ggml-vocab-phi-3.gguf")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("fixture %s not found", path)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tk, err := tokenizer.FromGGUFMetadata(f.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, ok := tk.ChatTemplate("")
	if !ok {
		t.Fatal("phi-3 vocabulary has no chat template")
	}
	got, err := Render(tmpl, withSystem, Options{AddGenerationPrompt: true, BOSToken: tk.Token(tk.BOS()), EOSToken: tk.Token(tk.EOS())})
	if err != nil {
		t.Fatal(err)
	}
	// This template ignores the system turn and always opens the
	// assistant turn after a user turn.
	want := "<s><|user|>\nHi there<|end|>\n<|assistant|>\nHello! How can I help?<|end|>\n<|user|>\nTell me a joke.<|end|>\n<|assistant|>\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	ids := tk.Encode(got, false)
	if user, _ := tk.ID("<|user|>"); ids[1] != user {
		t.Errorf("rendered prompt does not tokenize <|user|> as one token: %v", tk.Tokens(ids[:4]))
	}
}

func TestWhitespace(t *testing.T) {
	cases := []struct{ src, want string }{
		{"{% if true %}\n  A\n{% endif %}\n", "  A\n"},
		{"  {% if true %}X{% endif %}", "X"},
		{"a  {% if true %}X{% endif %}", "a  X"},
		{"{% if true %}A: {{ x }}{%- endif %}|", "A: max|"},
		{"{%- if true -%}<|s|>R E: {{ x | capitalize }}{%- endif -%}|", "<|s|>R E: Max|"},
		{"{{ x }}\n{% if true %}\n    y\n{% endif %}", "max\n    y\n"},
		{"{% for i in [1, 2] %}\n  {{ i }}\n{% endfor %}", "  1\n  2\n"},
		{"{% for i in [1, 2] %}\n    {% if i == 1 %}one{% endif %}\n{% endfor %}", "one"},
		{"{% if true %}{{ x }}\nfoo{% endif %}", "max\nfoo"},
		{"a {# c #} b", "a  b"},
		{"line\n    {# comment #}\nnext", "line\nnext"},
		{"{% raw %}{{ not evaluated }}{% endraw %}", "{{ not evaluated }}"},
		{"{% generation %}X{% endgeneration %}", "X"},
		{"{{ '{% not a tag %}' }}", "{% not a tag %}"},
		{"{{ 'it\\'s' }} it's \\ \"q\"", "it's it's \\ \"q\""},
		{"x\r\ny\n", "x\ny"},
		{"{{- ' a ' -}}  \n  b", " a b"},
		{"{%+ if true %}x{% endif %}", "x"},
		{"  {%+ if true %}x{% endif %}", "  x"},
	}
	for _, c := range cases {
		got, err := Render(c.src, nil, Options{Vars: map[string]any{"x": "max"}})
		if err != nil {
			t.Errorf("%q: %v", c.src, err)
			continue
		}
		if got != c.want {
			t.Errorf("%q: got %q, want %q", c.src, got, c.want)
		}
	}
}

func TestToJSON(t *testing.T) {
	opts := Options{Vars: map[string]any{"v": json.RawMessage(`{"b": 1, "a": [1, 2.5, "é\n<>&", null, true, {}], "c": 1e20}`)}}
	cases := []struct{ src, want string }{
		{"{{ v | tojson }}", `{"b": 1, "a": [1, 2.5, "é\n<>&", null, true, {}], "c": 1e+20}`},
		{"{{ v.a | tojson(indent=2) }}", "[\n  1,\n  2.5,\n  \"é\\n<>&\",\n  null,\n  true,\n  {}\n]"},
		{"{{ v | tojson(separators=(',', ':')) }}", `{"b":1,"a":[1,2.5,"é\n<>&",null,true,{}],"c":1e+20}`},
		{"{{ v | tojson(sort_keys=true) }}", `{"a": [1, 2.5, "é\n<>&", null, true, {}], "b": 1, "c": 1e+20}`},
		{"{{ 'é' | tojson(ensure_ascii=true) }}", `"\u00e9"`},
	}
	for _, c := range cases {
		got, err := Render(c.src, nil, opts)
		if err != nil {
			t.Errorf("%q: %v", c.src, err)
			continue
		}
		want := c.want
		if got != want {
			t.Errorf("%q:\n got %s\nwant %s", c.src, got, want)
		}
	}
}

func TestFeatures(t *testing.T) {
	cases := []struct{ src, want string }{
		{"{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}", "3"},
		{"{% for m in messages[1:] %}{{ m.role }},{% endfor %}", "assistant,user,"},
		{"{% for m in messages %}{% if loop.index0 == 1 %}{% continue %}{% endif %}{{ loop.index }}{% if loop.last %}L{% endif %}{% endfor %}", "13L"},
		{"{% for m in messages %}{% if loop.index == 2 %}{% break %}{% endif %}{{ m.role }}{% endfor %}", "user"},
		{"{{ ' pad '.strip() }}|{{ 'a,b'.split(',') | join('+') }}|{{ 'abc'.startswith('ab') }}", "pad|a+b|True"},
		{"{{ foo is defined }}{{ messages is defined }}{{ none is none }}", "FalseTrueTrue"},
		{"{{ messages | length }}{{ messages[-1].content }}", "3Tell me a joke."},
		{"{{ messages[0].get('name', 'anon') }}", "anon"},
	}
	for _, c := range cases {
		got, err := Render(c.src, noSystem, Options{})
		if err != nil {
			t.Errorf("%q: %v", c.src, err)
			continue
		}
		if got != c.want {
			t.Errorf("%q: got %q, want %q", c.src, got, c.want)
		}
	}
	if _, err := Render("{{ raise_exception('boom') }}", nil, Options{}); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("raise_exception: err = %v", err)
	}
	if _, err := Compile("{{ unclosed"); err == nil {
		t.Error("unclosed tag compiled")
	}
}

func TestFromJSON(t *testing.T) {
	msgs, err := FromJSON([]byte(`[{"role":"user","content":"hi"},{"role":"assistant","content":null,
		"tool_calls":[{"type":"function","function":{"name":"f","arguments":{"x":1}}}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Render(readTemplate(t, "qwen2.5.jinja"), msgs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call><|im_end|>\n"
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestRewriteToJSON(t *testing.T) {
	cases := []struct{ in, want string }{
		{" message.content | tojson ", " __tojson((message.content)) "},
		{" a[0].b | tojson(indent=4) ", " __tojson((a[0].b), indent=4) "},
		{" x | trim | tojson ", " __tojson((x | trim)) "},
		{" 'a' + b | tojson ", " 'a' + __tojson((b)) "},
		{" f(x) | tojson + 'z'", " __tojson((f(x))) + 'z'"},
		{" (a + b) | tojson", " __tojson(((a + b)))"},
		{" {'a': 1} | tojson", " __tojson(({'a': 1}))"},
		{" [1, 2]|tojson", " __tojson(([1, 2]))"},
		{" '| tojson' ", " '| tojson' "},
		{" x | tojson | safe", " __tojson((x)) | safe"},
		{" t.function.parameters | tojson(indent=2) | tojson", " __tojson((__tojson((t.function.parameters), indent=2)))"},
		{" if x in y | tojson", " if x in __tojson((y))"},
	}
	for _, c := range cases {
		if got := rewriteToJSON(c.in); got != c.want {
			t.Errorf("%q: got %q, want %q", c.in, got, c.want)
		}
	}
}

func FuzzRender(f *testing.F) {
	for _, name := range []string{"qwen2.5.jinja", "llama3.1.jinja", "llama2.jinja", "gemma.jinja", "phi3.jinja", "smollm2.jinja"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b), "user", "hi")
	}
	f.Add("{%- if x -%}{{ y | tojson(indent=2) }}{%+ endif +%}{# c #}{% raw %}{{{% endraw %}", "assistant", "{{")
	f.Fuzz(func(t *testing.T, src, role, content string) {
		if len(src) > 4096 {
			return
		}
		// Must not panic or hang; errors are fine.
		Render(src, []Message{{Role: role, Content: content}}, Options{AddGenerationPrompt: true})
	})
}
