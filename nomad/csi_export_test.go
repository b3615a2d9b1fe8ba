package nomad

import (
	"context"

	"github.com/berth-io/berth/nomad/volumewatcher"
)

// Test hooks for the external claim tests (package nomad_test).

// ReconcileVolumeForTest runs one volumewatcher pass over a volume now,
// on the caller's goroutine, exactly as the watcher would: a test can then
// assert what the watcher did not do, without waiting for it.
func (s *Server) ReconcileVolumeForTest(ns, id string) error {
	sc, err := s.csiTerm()
	if err != nil {
		return err
	}
	return sc.volumes.Release(context.Background(), ns, id, volumewatcher.ReleaseOptions{})
}
