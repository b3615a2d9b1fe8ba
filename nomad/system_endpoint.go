package nomad

import (
	"fmt"
	"time"

	"github.com/berth-io/berth/nomad/structs"
)

// System runs cluster-wide maintenance ("System.*").
type System struct {
	srv *Server
}

// GarbageCollect runs the leader's garbage collection now instead of at
// its next interval: plugin GC deletes every plugin with no instance and
// no live claims on its volumes, whatever its threshold, and claim GC
// queues every volume with claims in the volumewatcher. It returns once
// the deletions are committed; claims are released by the watcher in the
// background, never by GC itself.
func (s *System) GarbageCollect(args *structs.GenericRequest, reply *structs.GenericResponse) (err error) {
	defer wire(&err)
	defer measureRPC("System.GarbageCollect", time.Now())
	args.AllowStale = false // only the leader collects
	if done, err := s.srv.forward("System.GarbageCollect", args, args, reply); done {
		return err
	}
	sc, err := s.srv.csiTerm()
	if err != nil {
		return err
	}
	ctx, cancel := s.srv.csiContext()
	defer cancel()
	index, err := s.srv.gcPlugins(ctx, nil, true)
	if err != nil {
		return fmt.Errorf("garbage collecting CSI plugins: %w", err)
	}
	if err := sc.volumes.EnqueueAll(); err != nil {
		return fmt.Errorf("garbage collecting CSI claims: %w", err)
	}
	reply.Index = max(index, s.srv.latestIndex())
	return nil
}
