//go:build !linux

package allocdir

func unmountUnder(string) error { return nil }
