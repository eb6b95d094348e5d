// Package chat renders chat templates: the Jinja templates Hugging Face
// models ship in tokenizer_config.json ("chat_template", a string or a
// list of named templates) and GGUF files carry as tokenizer.chat_template.
// The output is the exact prompt text transformers' apply_chat_template
// produces, ready for the tokenizer.
//
// # Engine
//
// Templates run on github.com/ardanlabs/jinja (v1.8.0), chosen over
// github.com/nikolalohinski/gonja/v2 (v2.9.1) after rendering a set of real
// model templates (Llama 3.2, Qwen 3/3.5, Gemma 4, gpt-oss, Mistral,
// Kimi, LFM2.5, Nemotron, Phi-3, ...) with both: gonja failed to parse six
// of seventeen and its whitespace control diverged on others, while the
// ardanlabs engine, written for LLM chat templates, parsed and rendered all
// of them and has raise_exception, namespace, strftime_now, loop controls,
// Python string and dict methods, slicing and ordered dicts.
//
// Whitespace is not left to the engine. Jinja's rules as transformers
// configures them (trim_blocks and lstrip_blocks on, plus the "-" and "+"
// markers) are applied here, by a lexer that follows Jinja2's; every piece
// of literal text then reaches the engine as a string expression, so the
// engine's own trimming (which in v1.8.0 reaches past an intervening
// {{ }} to trim text that is not adjacent to the tag) never applies.
//
// transformers-specific behaviour is reproduced on top. tojson is
// json.dumps with ensure_ascii=False (insertion-ordered keys, Python's
// separators, indent, sort_keys); since the engine resolves filters among
// its built-ins only (and its indenting tojson sorts keys and escapes
// HTML), every "x | tojson(...)" in a tag is rewritten to a call of ours
// (rewrite.go). strftime_now reads Options.Now, and the {% generation %}
// markers of transformers' AssistantTracker extension render their
// content unchanged. Messages and tools keep their key order (JSON input
// is parsed in order).
//
// Rendering is not sandboxed against hostile templates beyond Go's own
// safety: a template can loop for a long time. Templates come with the
// model, as with transformers.
package chat

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ardanlabs/jinja"
)

// Message is one conversation turn.
type Message struct {
	Role    string
	Content string
	// Optional fields; empty ones are left out of the message the
	// template sees (so "is defined" tests behave as in Python).
	Name       string
	ToolCallID string
	ToolCalls  []ToolCall
	// Extra adds or overrides message keys (e.g. "reasoning_content",
	// or "content" set to nil or a list of parts).
	Extra map[string]any
}

// ToolCall is an assistant's request to call a tool.
type ToolCall struct {
	ID        string
	Type      string // "function" when empty
	Name      string
	Arguments any // a map, or a JSON string as some APIs send it
}

// Options are the template variables besides messages.
type Options struct {
	AddGenerationPrompt bool
	BOSToken, EOSToken  string
	// Tools are tool definitions (JSON schema objects); json.RawMessage
	// and string values are parsed keeping key order.
	Tools []any
	// Documents for retrieval-augmented templates.
	Documents []any
	// Now is the time strftime_now reports; the zero value means
	// time.Now().
	Now time.Time
	// Vars are extra variables (enable_thinking, date_string, ...).
	Vars map[string]any
}

// Template is a compiled chat template, safe for concurrent use.
type Template struct {
	t *jinja.Template
}

// Compile prepares a template for rendering.
func Compile(source string) (*Template, error) {
	src, err := normalizeWhitespace(source)
	if err != nil {
		return nil, fmt.Errorf("chat: template: %w", err)
	}
	t, err := jinja.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("chat: template: %w", err)
	}
	return &Template{t: t}, nil
}

// Render compiles and renders a template in one step.
func Render(template string, messages []Message, opts Options) (string, error) {
	t, err := Compile(template)
	if err != nil {
		return "", err
	}
	return t.Render(messages, opts)
}

// Render renders the conversation.
func (t *Template) Render(messages []Message, opts Options) (out string, err error) {
	defer func() {
		// The engine is young; a template it mishandles must not take
		// the server down.
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("chat: render: engine panic: %v", r)
		}
	}()
	data, err := opts.values(messages)
	if err != nil {
		return "", err
	}
	s, err := t.t.RenderValues(data)
	if err != nil {
		return "", fmt.Errorf("chat: render: %w", err)
	}
	return s, nil
}

func (o *Options) values(messages []Message) (map[string]jinja.Value, error) {
	msgs := make([]jinja.Value, len(messages))
	for i, m := range messages {
		v, err := m.value()
		if err != nil {
			return nil, fmt.Errorf("chat: message %d: %w", i, err)
		}
		msgs[i] = v
	}
	data := map[string]jinja.Value{
		"messages":              jinja.NewList(msgs),
		"add_generation_prompt": jinja.NewBool(o.AddGenerationPrompt),
		"bos_token":             jinja.NewString(o.BOSToken),
		"eos_token":             jinja.NewString(o.EOSToken),
	}
	if o.Tools != nil {
		v, err := toValue(o.Tools)
		if err != nil {
			return nil, fmt.Errorf("chat: tools: %w", err)
		}
		data["tools"] = v
	}
	if o.Documents != nil {
		v, err := toValue(o.Documents)
		if err != nil {
			return nil, fmt.Errorf("chat: documents: %w", err)
		}
		data["documents"] = v
	}
	for _, k := range slices.Sorted(maps.Keys(o.Vars)) {
		v, err := toValue(o.Vars[k])
		if err != nil {
			return nil, fmt.Errorf("chat: variable %q: %w", k, err)
		}
		data[k] = v
	}
	now := o.Now
	data["strftime_now"] = jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		t := now
		if t.IsZero() {
			t = time.Now()
		}
		format := "%Y-%m-%d"
		if len(args) > 0 && args[0].IsString() {
			format = args[0].AsString()
		}
		return jinja.NewString(strftime(t, format)), nil
	})
	// Templates' "| tojson" is rewritten to this call (see rewrite.go).
	data["__tojson"] = jinja.NewCallable("tojson", filterToJSON)
	return data, nil
}

func (m *Message) value() (jinja.Value, error) {
	v := jinja.NewDict()
	d := v.AsDict()
	d.Set("role", jinja.NewString(m.Role))
	d.Set("content", jinja.NewString(m.Content))
	if m.Name != "" {
		d.Set("name", jinja.NewString(m.Name))
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]jinja.Value, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			cv := jinja.NewDict()
			cd := cv.AsDict()
			if c.ID != "" {
				cd.Set("id", jinja.NewString(c.ID))
			}
			typ := c.Type
			if typ == "" {
				typ = "function"
			}
			cd.Set("type", jinja.NewString(typ))
			args, err := toValue(c.Arguments)
			if err != nil {
				return v, fmt.Errorf("tool call %d arguments: %w", i, err)
			}
			if c.Arguments == nil {
				args = jinja.NewDict()
			}
			fv := jinja.NewDict()
			fv.AsDict().Set("name", jinja.NewString(c.Name))
			fv.AsDict().Set("arguments", args)
			cd.Set("function", fv)
			calls[i] = cv
		}
		d.Set("tool_calls", jinja.NewList(calls))
	}
	if m.ToolCallID != "" {
		d.Set("tool_call_id", jinja.NewString(m.ToolCallID))
	}
	for _, k := range slices.Sorted(maps.Keys(m.Extra)) {
		x, err := toValue(m.Extra[k])
		if err != nil {
			return v, fmt.Errorf("%q: %w", k, err)
		}
		d.Set(k, x)
	}
	return v, nil
}

// FromJSON converts OpenAI-style JSON messages ([{"role":..., "content":...,
// "tool_calls": [...]}, ...]) into Messages, keeping every field.
func FromJSON(data []byte) ([]Message, error) {
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("chat: messages: %w", err)
	}
	out := make([]Message, len(raw))
	for i, r := range raw {
		m := &out[i]
		for k, v := range r {
			switch k {
			case "role":
				if err := json.Unmarshal(v, &m.Role); err != nil {
					return nil, fmt.Errorf("chat: message %d: role: %w", i, err)
				}
				continue
			case "content":
				if json.Unmarshal(v, &m.Content) == nil {
					continue
				}
			}
			if m.Extra == nil {
				m.Extra = map[string]any{}
			}
			m.Extra[k] = json.RawMessage(v)
		}
	}
	return out, nil
}
