//go:build !crashpoints || !linux

package crashpoint

// Hit does nothing without the crashpoints build tag.
func Hit(Point) {}
