//go:build !linux

package csimanager

import "errors"

// IsMountpoint needs Linux.
func IsMountpoint(string) (bool, error) {
	return false, errors.New("checking mount points needs Linux")
}

func removeEmptyDirs(string, string) error { return nil }

// DetachMountsUnder needs Linux; elsewhere there is nothing to detach.
func DetachMountsUnder(string) error { return nil }
