//go:build !unix

package mapfile

import "errors"

func mkfifo(string) error { return errors.New("no FIFOs on this platform") }
