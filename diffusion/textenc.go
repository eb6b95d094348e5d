package diffusion

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/chat"
	"github.com/cortiq/cortiq/cpu"
	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tokenizer"
)

// TextEncoder turns a prompt into caption features as ZImagePipeline does:
// the prompt as the user turn of the tokenizer's chat template (generation
// prompt added, enable_thinking true), tokenized, run through the language
// model; the features are hidden_states[-2], the residual stream entering
// the last decoder layer, one row per prompt token.
type TextEncoder struct {
	Tokenizer *tokenizer.Tokenizer
	template  *chat.Template
	model     *model.Model
	backend   *cpu.Backend
	layer     int
	// MaxTokens is the longest prompt accepted (diffusers truncates at
	// max_sequence_length, 512; here a longer prompt is an error).
	MaxTokens int
	Hidden    int
	// newSession, when set, runs the feature layers (SetLayers).
	newSession func(maxLen int) (backend.Session, error)
}

// Model is the text encoder's language model (for a device backend of
// it; the encoder does not own it).
func (te *TextEncoder) Model() *model.Model { return te.model }

// Layers is how many decoder layers make the features: all but the last
// (the features are the residual stream entering it).
func (te *TextEncoder) Layers() int { return te.layer }

// SetLayers runs the feature layers on sessions of another backend of
// Model() (a device): per prompt, the embeddings on the CPU, then a fresh
// session's ForwardLayers (backend.LayerRunner) over layers [0, Layers()).
// nil runs them on the CPU again.
func (te *TextEncoder) SetLayers(newSession func(maxLen int) (backend.Session, error)) {
	te.newSession = newSession
}

// hidden is the features of ids: hidden_states[Layers()].
func (te *TextEncoder) hidden(ids []int) ([]float32, error) {
	if te.newSession == nil {
		return te.backend.HiddenStates(ids, te.layer)
	}
	x, err := te.backend.HiddenStates(ids, 0) // the embeddings
	if err != nil {
		return nil, err
	}
	s, err := te.newSession(len(ids))
	if err != nil {
		return nil, fmt.Errorf("text encoder: %w", err)
	}
	defer s.Close()
	lr, ok := s.(backend.LayerRunner)
	if !ok {
		return nil, fmt.Errorf("text encoder: a %T session does not run layers", s)
	}
	if err := lr.ForwardLayers(x, len(ids), 0, 0, te.layer); err != nil {
		return nil, fmt.Errorf("text encoder: %w", err)
	}
	return x, nil
}

// tokenizerFiles are the tokenizer/ files the text encoder reads.
var tokenizerFiles = []string{"tokenizer.json", "tokenizer_config.json", "generation_config.json", "chat_template.jinja"}

// readTokenizerDir reads tokenizer/ (tokenizer.json required).
func readTokenizerDir(dir string) (*model.TokenizerData, error) {
	td := &model.TokenizerData{Kind: "hf", Files: map[string][]byte{}}
	for _, name := range tokenizerFiles {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err == nil {
			td.Files[name] = b
		} else if name == "tokenizer.json" {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
	}
	return td, nil
}

// newTextEncoder wraps a transformers language model (run by the cpu
// engine) and its tokenizer (tokenizer.json, with its chat template in
// tokenizer_config.json or chat_template.jinja). The model's weights are
// released by whoever opened them.
func newTextEncoder(m *model.Model, teName string, td *model.TokenizerData, tokName string, maxTokens int) (*TextEncoder, error) {
	if td == nil {
		return nil, fmt.Errorf("%s: no tokenizer", tokName)
	}
	tok, err := tokenizer.Load(td)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tokName, err)
	}
	src, ok := tok.ChatTemplate("")
	if !ok || src == "" {
		b, ok := td.Files["chat_template.jinja"]
		if !ok {
			return nil, fmt.Errorf("%s: no chat template (neither in tokenizer_config.json nor chat_template.jinja)", tokName)
		}
		src = string(b)
	}
	tmpl, err := chat.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tokName, err)
	}
	b, err := cpu.New(m, cpu.Options{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", teName, err)
	}
	L := len(m.Arch.Layers)
	if L < 2 {
		return nil, fmt.Errorf("%s: a text encoder of %d layers has no second-to-last hidden state", teName, L)
	}
	te := &TextEncoder{Tokenizer: tok, template: tmpl, model: m, backend: b, layer: L - 1, MaxTokens: maxTokens, Hidden: m.Arch.Hidden}
	if c := m.Arch.Context; c > 0 && c < te.MaxTokens {
		te.MaxTokens = c
	}
	return te, nil
}

// Render is the prompt as the chat template renders it.
func (te *TextEncoder) Render(prompt string) (string, error) {
	return te.template.Render([]chat.Message{{Role: "user", Content: prompt}}, chat.Options{
		AddGenerationPrompt: true,
		BOSToken:            te.Tokenizer.Token(te.Tokenizer.BOS()),
		EOSToken:            te.Tokenizer.Token(te.Tokenizer.EOS()),
		Vars:                map[string]any{"enable_thinking": true},
	})
}

// ErrPromptTooLong is returned (wrapped) for a prompt beyond MaxTokens.
var ErrPromptTooLong = errors.New("prompt too long")

// Tokens renders and tokenizes the prompt as the pipeline's tokenizer call
// does (special tokens added as the tokenizer's post-processor says).
func (te *TextEncoder) Tokens(prompt string) ([]int, error) {
	text, err := te.Render(prompt)
	if err != nil {
		return nil, err
	}
	ids := te.Tokenizer.Encode(text, true)
	if len(ids) > te.MaxTokens {
		return nil, fmt.Errorf("%w: %d tokens with the chat template, the text encoder takes at most %d", ErrPromptTooLong, len(ids), te.MaxTokens)
	}
	return ids, nil
}

// Encode returns the caption features [n, Hidden] of the prompt.
func (te *TextEncoder) Encode(prompt string) ([]float32, int, error) {
	ids, err := te.Tokens(prompt)
	if err != nil {
		return nil, 0, err
	}
	h, err := te.hidden(ids)
	if err != nil {
		return nil, 0, err
	}
	return h, len(ids), nil
}

// EncodeIDs returns the caption features of already tokenized ids.
func (te *TextEncoder) EncodeIDs(ids []int) ([]float32, error) {
	return te.hidden(ids)
}

// openTextEncoderModel imports text_encoder/ (a transformers checkpoint).
func openTextEncoderModel(dir string) (*model.Model, error) {
	m, err := importer.FromHF(dir)
	if err != nil {
		return nil, fmt.Errorf("diffusion: %w", err)
	}
	return m, nil
}
