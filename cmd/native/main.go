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
//	cortiq version
//
// 'cortiq help COMMAND' and 'cortiq COMMAND -h' print a command's synopsis
// and flags (exit 0). Exit status: 0 on success, 1 on an error, 2 on a
// usage error, 130 when interrupted (Ctrl-C, after stopping cleanly).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/cortiq/cortiq/resolve"
)

type command struct {
	synopsis string // the usage line after "cortiq "
	summary  string
	run      func(args []string) error
}

var commands = map[string]command{}

// synopses holds the usage line of every flag set by name (commands and
// sub-commands such as "remote run").
var synopses = map[string]string{}

func register(name, synopsis, summary string, run func(args []string) error) {
	commands[name] = command{synopsis, summary, run}
	synopses[name] = synopsis
}

// errInterrupted ends a command stopped by a signal (exit status 130).
var errInterrupted = errors.New("interrupted")

// usageError is a command line that does not parse (exit status 2).
type usageError struct {
	fs  *flag.FlagSet
	err error
}

func (u usageError) Error() string { return u.err.Error() }

// helpRequest is -h or --help (exit status 0, help on stdout).
type helpRequest struct{ fs *flag.FlagSet }

func (helpRequest) Error() string { return "help requested" }

// newFlags makes a command's flag set. Parse through parseFlags: -h and
// parse errors come back to main, which prints the synopsis and flags.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return helpRequest{fs}
		}
		return usageError{fs, err}
	}
	return nil
}

// printHelp writes a flag set's synopsis, summary and flags.
func printHelp(w io.Writer, fs *flag.FlagSet) {
	name := fs.Name()
	fmt.Fprintf(w, "usage: cortiq %s\n", synopses[name])
	if c, ok := commands[name]; ok {
		fmt.Fprintf(w, "\n%s.\n", c.summary)
	}
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintln(w, "\nflags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: cortiq COMMAND [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-11s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'cortiq help COMMAND' (or 'cortiq COMMAND -h') for a command's synopsis and flags.")
}

func main() { os.Exit(cortiqMain(os.Args[1:])) }

func cortiqMain(args []string) int {
	if len(args) == 0 {
		usage(os.Stderr)
		return 2
	}
	name := args[0]
	switch name {
	case "-h", "--help", "-help":
		usage(os.Stdout)
		return 0
	case "help":
		if len(args) == 1 {
			usage(os.Stdout)
			return 0
		}
		if _, ok := commands[args[1]]; !ok {
			fmt.Fprintf(os.Stderr, "cortiq help: unknown command %q\n\n", args[1])
			usage(os.Stderr)
			return 2
		}
		name, args = args[1], []string{args[1], "-h"}
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "cortiq: unknown command %q\n\n", name)
		usage(os.Stderr)
		return 2
	}
	defer privateRuntimeDir()()
	if err := applyKernelEnv(); err != nil {
		fmt.Fprintf(os.Stderr, "cortiq: %v\n", err)
		return 2
	}
	err := cmd.run(args[1:])
	var help helpRequest
	var bad usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &help):
		printHelp(os.Stdout, help.fs)
		return 0
	case errors.As(err, &bad):
		fmt.Fprintf(os.Stderr, "cortiq %s: %v\nusage: cortiq %s\nRun 'cortiq help %s' for the flags.\n", name, bad.err, synopses[bad.fs.Name()], name)
		return 2
	case errors.Is(err, errInterrupted):
		fmt.Fprintf(os.Stderr, "cortiq %s: interrupted\n", name)
		return 130
	}
	fmt.Fprintf(os.Stderr, "cortiq %s: %v\n", name, err)
	if errors.Is(err, resolve.ErrNotFound) {
		fmt.Fprintln(os.Stderr, "cortiq: pass the model's path to -m, or put the file in a folder listed in CORTIQ_MODEL_PATH (separated like PATH; searched by name after the cache)")
	}
	return 1
}
