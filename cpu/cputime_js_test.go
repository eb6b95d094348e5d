//go:build js

package cpu

import (
	"syscall/js"
	"time"
)

// cpuTime is the process's CPU time (user and system): under Node,
// process.cpuUsage(); 0 where there is none (a browser).
func cpuTime() time.Duration {
	p := js.Global().Get("process")
	if p.IsUndefined() || p.Get("cpuUsage").IsUndefined() {
		return 0
	}
	u := p.Call("cpuUsage")
	return time.Duration(u.Get("user").Float()+u.Get("system").Float()) * time.Microsecond
}
