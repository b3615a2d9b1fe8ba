package hostpath

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// identityServer serves the CSI Identity service.
type identityServer struct {
	csi.UnimplementedIdentityServer
	p *Plugin
}

func (s *identityServer) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{
		Name:          Name,
		VendorVersion: Version,
		Manifest:      map[string]string{"mode": string(s.p.cfg.Mode)},
	}, nil
}

func (s *identityServer) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	var caps []*csi.PluginCapability
	service := func(t csi.PluginCapability_Service_Type) {
		caps = append(caps, &csi.PluginCapability{Type: &csi.PluginCapability_Service_{
			Service: &csi.PluginCapability_Service{Type: t},
		}})
	}
	if s.p.cfg.Mode.servesController() {
		service(csi.PluginCapability_Service_CONTROLLER_SERVICE)
		// A directory can grow while it is in use.
		caps = append(caps, &csi.PluginCapability{Type: &csi.PluginCapability_VolumeExpansion_{
			VolumeExpansion: &csi.PluginCapability_VolumeExpansion{Type: csi.PluginCapability_VolumeExpansion_ONLINE},
		}})
	}
	if s.p.cfg.Topology {
		service(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS)
	}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: caps}, nil
}

// Probe reports ready: New has loaded the state before anything is served.
// A plugin that cannot mount is ready too; NodeGetInfo says why it cannot
// serve volumes (see Config.CanMount).
func (s *identityServer) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}
