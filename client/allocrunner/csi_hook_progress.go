package allocrunner

import (
	"context"
	"time"

	"github.com/berth-io/berth/nomad/structs"
)

// csiProgressTimeout bounds one progress report: it is best effort, and a
// release must not wait long on servers that cannot answer.
const csiProgressTimeout = 2 * time.Second

// reportProgress tells the servers why a volume's claim is not moving on
// this node (CSIVolume.ReportProgress): what failed (why; "" once it
// worked), the attempts so far and when the next one is due. The servers
// cannot see a node plugin that is down; this is how `volume status
// -verbose` shows "node plugin X not running" with the attempts and the
// next retry. A failed report is logged and otherwise ignored: the
// release or setup goes on regardless.
func (h *csiHook) reportProgress(source, namespace, phase, why string, attempts int, next time.Time) {
	ctx, cancel := context.WithTimeout(h.ctx, csiProgressTimeout)
	defer cancel()
	req := &structs.CSIVolumeClaimProgressRequest{
		VolumeID: source, AllocationID: h.alloc.ID, NodeID: h.cfg.NodeID(),
		Phase: phase, Error: why, Attempts: attempts,
		WriteRequest: structs.WriteRequest{Namespace: namespace},
	}
	if why != "" && !next.IsZero() {
		req.NextRetry = next.UnixNano()
	}
	var resp structs.GenericResponse
	if err := h.cfg.RPC(ctx, "CSIVolume.ReportProgress", req, &resp); err != nil {
		h.logger.Debug("reporting the claim's progress to the servers failed", "volume_id", source, "phase", phase, "error", err)
	}
}
