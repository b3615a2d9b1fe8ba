//go:build !linux

package taskrunner

import "errors"

func makeSharedMount(string) error {
	return errors.New("plugins whose driver mounts need Linux")
}
