package claims

import (
	"github.com/berth-io/berth/helper/simbug"
	"github.com/berth-io/berth/nomad/structs"
)

// Profile is what a volume's plugin can do, as the servers see it now. The
// protocol asks for no RPC the plugin does not advertise (CSI spec §
// "Controller Service RPC": a CO must not call ControllerPublishVolume
// unless the controller has PUBLISH_UNPUBLISH_VOLUME, and must send
// readonly=false unless it has PUBLISH_READONLY). NodeStage is the
// client's decision (STAGE_UNSTAGE_VOLUME of the node plugin on that
// node), so it is not here.
type Profile struct {
	// ControllerPublish: claims are controller-published and unpublished.
	// The plugin's controllers advertise PUBLISH_UNPUBLISH_VOLUME and the
	// servers can reach controllers.
	ControllerPublish bool
	// PublishReadOnly: ControllerPublish may say readonly=true.
	PublishReadOnly bool
}

// ProfileOf is the profile of plugin p (nil: not fingerprinted by any node
// yet, which publishes nothing). reach says whether the servers can call
// controllers at all (they can in every agent; tests may run without).
func ProfileOf(p *structs.CSIPlugin, reach bool) Profile {
	if p == nil || !reach {
		return Profile{}
	}
	return Profile{
		ControllerPublish: p.PublishUnpublish || (simbug.On(simbug.IgnoreCapability) && p.ControllersExpected > 0),
		PublishReadOnly:   p.PublishUnpublish && p.PublishReadOnly,
	}
}

// ControllerNeeded reports whether claiming through p needs a healthy
// controller instance, and if it has none, why placing a claim would wait
// forever. The scheduler and the volume's Schedulable flag use it, so a
// node-only plugin is schedulable without controllers.
func ControllerNeeded(p *structs.CSIPlugin) bool {
	return p != nil && p.PublishUnpublish
}
