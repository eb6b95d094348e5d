//go:build !unix

package mapfile

const openNonblock = 0
