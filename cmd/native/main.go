// Command cortiq runs language models: generation, logits, import to CMF,
// model info, benchmarks, synthetic models, tokenization, chat, device
// listing and the HTTP/websocket server.
//
//	cortiq run -m MODEL [-p TEXT | --ids 1,2,3] [-n N] [--temp T] ... [--json]
//	cortiq logits -m MODEL --ids 1,2,3 -o OUT.safetensors
//	cortiq import SRC -o OUT.cmf [--quant f32|f16|q8_0|q4_0]
//	cortiq info -m MODEL
//	cortiq bench -m MODEL [--prompt 128] [--gen 128] [--json]
//	cortiq synth --shape llama-1b --quant q4_0 -o OUT.gguf
//	cortiq tokenize -m MODEL [--special] [--json] < text
//	cortiq detokenize -m MODEL --ids 1,2,3
//	cortiq chat -m MODEL
//	cortiq devices
//	cortiq serve -m MODEL [-m MODEL...] [--addr 127.0.0.1:8080]
package main

import (
	"fmt"
	"os"
	"sort"
)

type command struct {
	summary string
	run     func(args []string) error
}

var commands = map[string]command{}

func register(name, summary string, run func(args []string) error) {
	commands[name] = command{summary, run}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: cortiq COMMAND [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-11s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(os.Stderr, "\nRun 'cortiq COMMAND -h' for a command's flags.")
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		if len(os.Args) < 2 {
			os.Exit(2)
		}
		return
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "cortiq: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err := applyKernelEnv(); err != nil {
		fmt.Fprintf(os.Stderr, "cortiq: %v\n", err)
		os.Exit(2)
	}
	if err := cmd.run(os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "cortiq %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
