//go:build simbugs

package simbug

import "sync"

var (
	mu    sync.Mutex
	armed = map[Bug]bool{}
)

// On reports whether b is armed.
func On(b Bug) bool {
	mu.Lock()
	defer mu.Unlock()
	return armed[b]
}

// Arm arms b until the returned func disarms it.
func Arm(b Bug) (disarm func()) {
	mu.Lock()
	defer mu.Unlock()
	armed[b] = true
	return func() {
		mu.Lock()
		defer mu.Unlock()
		delete(armed, b)
	}
}
