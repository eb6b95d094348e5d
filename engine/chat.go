package engine

import (
	"errors"

	"github.com/cortiq/cortiq/chat"
)

// ChatPrompt renders messages with the model's chat template, ending with
// the assistant's turn opened (add_generation_prompt), as HF's
// apply_chat_template does.
func (e *Engine) ChatPrompt(messages []chat.Message) (string, error) {
	if e.Tokenizer == nil {
		return "", errors.New("engine: the model has no tokenizer, so no chat template")
	}
	tmpl, ok := e.Tokenizer.ChatTemplate("")
	if !ok || tmpl == "" {
		tmpl = fallbackTemplate
	}
	return chat.Render(tmpl, messages, chat.Options{
		AddGenerationPrompt: true,
		BOSToken:            e.Tokenizer.Token(e.Tokenizer.BOS()),
		EOSToken:            e.Tokenizer.Token(e.Tokenizer.EOS()),
	})
}

// fallbackTemplate is ChatML, for models that ship no template (as
// llama.cpp and HF's old default do).
const fallbackTemplate = `{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}`

// EncodeTemplated tokenizes text that already holds the template's special
// tokens: nothing is added, special tokens in the text are matched.
func (e *Engine) EncodeTemplated(text string) ([]int, error) {
	if e.Tokenizer == nil {
		return nil, errors.New("engine: the model has no tokenizer")
	}
	return e.Tokenizer.Encode(text, false), nil
}
