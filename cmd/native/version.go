package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

func init() {
	register("version", "version", "print the version: module version, VCS revision and time, Go version and platform", cmdVersion)
}

func cmdVersion(args []string) error {
	fs := newFlags("version")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fs, fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	fmt.Println(versionString())
	return nil
}

// versionString is "cortiq VERSION (REVISION[+modified], TIME) GOVERSION
// OS/ARCH" from the build information the Go toolchain stamps in.
func versionString() string {
	version, rev, when, modified := "unknown", "", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		version = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	vcs := "no VCS information"
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if modified {
			rev += "+modified"
		}
		vcs = rev
		if when != "" {
			vcs += ", " + when
		}
	}
	return fmt.Sprintf("cortiq %s (%s) %s %s/%s", version, vcs, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
