//go:build amd64 && !purego

package kernel

// spinPause is one PAUSE: a polling loop's hint to the core (it yields the
// pipeline to a sibling hyperthread and eases the exit from the loop).
//
//go:noescape
func spinPause()
