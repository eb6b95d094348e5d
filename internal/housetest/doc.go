// Package housetest holds the repository's structural tests (issue 18,
// "the house"): house_test.go reads the import graph and the sources and
// fails, naming the file, when a layer leaks into another. It has no
// code of its own.
package housetest
