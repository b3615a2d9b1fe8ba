package fake

import (
	"context"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func (p *Plugin) GetPluginInfo(ctx context.Context, req *csipb.GetPluginInfoRequest) (*csipb.GetPluginInfoResponse, error) {
	return handle(ctx, p, "GetPluginInfo", req, func(s Settings, _ *csipb.GetPluginInfoRequest) *csipb.GetPluginInfoResponse {
		return &csipb.GetPluginInfoResponse{Name: s.Name, VendorVersion: s.Version}
	})
}

func (p *Plugin) GetPluginCapabilities(ctx context.Context, req *csipb.GetPluginCapabilitiesRequest) (*csipb.GetPluginCapabilitiesResponse, error) {
	return handle(ctx, p, "GetPluginCapabilities", req, func(s Settings, _ *csipb.GetPluginCapabilitiesRequest) *csipb.GetPluginCapabilitiesResponse {
		resp := &csipb.GetPluginCapabilitiesResponse{}
		for _, t := range s.PluginServices {
			resp.Capabilities = append(resp.Capabilities, &csipb.PluginCapability{
				Type: &csipb.PluginCapability_Service_{Service: &csipb.PluginCapability_Service{Type: t}},
			})
		}
		if s.VolumeExpansion != csipb.PluginCapability_VolumeExpansion_UNKNOWN {
			resp.Capabilities = append(resp.Capabilities, &csipb.PluginCapability{
				Type: &csipb.PluginCapability_VolumeExpansion_{
					VolumeExpansion: &csipb.PluginCapability_VolumeExpansion{Type: s.VolumeExpansion}},
			})
		}
		return resp
	})
}

func (p *Plugin) Probe(ctx context.Context, req *csipb.ProbeRequest) (*csipb.ProbeResponse, error) {
	return handle(ctx, p, "Probe", req, func(s Settings, _ *csipb.ProbeRequest) *csipb.ProbeResponse {
		if s.Ready == nil {
			return &csipb.ProbeResponse{}
		}
		return &csipb.ProbeResponse{Ready: wrapperspb.Bool(*s.Ready)}
	})
}
