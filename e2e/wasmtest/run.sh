#!/bin/sh
# Runs cortiq's browser-only test suites (OPFS storage, downloads into OPFS,
# the harness itself) inside a dedicated Worker of headless Chromium.
# Needs chromium (apt-get install -y chromium) or $CHROMIUM; without it the
# tests skip with a message. Extra arguments go to `go test`, e.g. -v.
set -e
cd "$(dirname "$0")/../.."
exec go test "$@" -run 'InChromium|TestProbe|TestFailureExitCode' \
	./e2e/wasmtest/ ./storage/opfs/ ./storage/download/
