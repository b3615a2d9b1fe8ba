//go:build !simbugs

package simbug

// On reports whether b is armed: never, without the simbugs build tag.
func On(Bug) bool { return false }
