package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cortiq/cortiq/chat"
	"github.com/cortiq/cortiq/engine"
)

func init() {
	register("chat", "chat [-m MODEL] [flags]", "interactive chat with streaming, history and /reset", cmdChat)
}

func renderChat(e *engine.Engine, msgs []chat.Message, system string) (string, error) {
	if system != "" {
		msgs = append([]chat.Message{{Role: "system", Content: system}}, msgs...)
	}
	return e.ChatPrompt(msgs)
}

func cmdChat(args []string) error {
	fs := newFlags("chat")
	var mf modelFlags
	var sf samplingFlags
	mf.register(fs)
	sf.register(fs)
	system := fs.String("system", "", "system message")
	n := fs.Int("n", 512, "max tokens per reply (-1 = up to the context limit)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	// Each turn continues the conversation's kept session: only the new
	// messages are prefilled.
	mf.prefixCache = chatPrefixCache
	if err := sf.check(); err != nil {
		return usageError{fs, err}
	}
	if *n == 0 {
		return usageError{fs, fmt.Errorf("-n 0: a reply needs at least one token (-1 = up to the context limit)")}
	}
	maxNew, err := maxTokens(*n)
	if err != nil {
		return usageError{fs, err}
	}
	ctx, cancel := interruptible()
	defer cancel()
	e, err := mf.load(ctx)
	if err != nil {
		return err
	}
	defer e.Close()
	fmt.Fprintf(os.Stderr, "cortiq chat on %s — /reset clears the history, /quit or Ctrl-D ends\n", e.BackendName())
	var history []chat.Message
	in := bufio.NewReader(os.Stdin)
	for {
		fmt.Fprint(os.Stderr, "> ")
		line, err := in.ReadString('\n')
		if err != nil && err != io.EOF {
			return err
		}
		text := strings.TrimRight(line, "\r\n")
		switch strings.TrimSpace(text) {
		case "/quit", "/exit":
			return nil
		case "/reset":
			history = nil
			fmt.Fprintln(os.Stderr, "(history cleared)")
			continue
		case "":
			if err == io.EOF {
				return nil
			}
			continue
		}
		history = append(history, chat.Message{Role: "user", Content: text})
		prompt, perr := renderChat(e, history, *system)
		if perr != nil {
			return perr
		}
		ids, perr := e.EncodeTemplated(prompt)
		if perr != nil {
			return perr
		}
		res, gerr := e.Generate(ctx, engine.Request{IDs: ids, MaxTokens: maxNew, Sampling: sf.params()}, func(t engine.Token) error {
			_, err := fmt.Print(t.Text)
			return err
		})
		if gerr != nil {
			return interrupted(ctx, gerr)
		}
		fmt.Println()
		if res.FinishReason == "cancelled" {
			return errInterrupted
		}
		history = append(history, chat.Message{Role: "assistant", Content: strings.TrimSpace(res.Text)})
		if err == io.EOF {
			return nil
		}
	}
}

// chatPrefixCache holds one conversation's session (a device session
// allocates its whole context).
const chatPrefixCache = 4 << 30
