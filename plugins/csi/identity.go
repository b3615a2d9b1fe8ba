package csi

import (
	"context"
	"errors"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
)

func (c *client) PluginInfo(ctx context.Context) (string, string, error) {
	const rpc = "GetPluginInfo"
	resp, err := c.identity.GetPluginInfo(ctx, &csipb.GetPluginInfoRequest{})
	if err := result(ctx, rpc, subject{}, err); err != nil {
		return "", "", err
	}
	if resp.GetName() == "" {
		return "", "", &Error{RPC: rpc, Class: Final, Attempts: 1,
			Err: errors.New("plugin returned an empty name")}
	}
	return resp.GetName(), resp.GetVendorVersion(), nil
}

func (c *client) PluginCapabilities(ctx context.Context) (*PluginCapabilitySet, error) {
	resp, err := c.identity.GetPluginCapabilities(ctx, &csipb.GetPluginCapabilitiesRequest{})
	if err := result(ctx, "GetPluginCapabilities", subject{}, err); err != nil {
		return nil, err
	}
	return pluginCapabilitiesFromProto(resp.GetCapabilities()), nil
}

func (c *client) Probe(ctx context.Context) (bool, error) {
	resp, err := c.identity.Probe(ctx, &csipb.ProbeRequest{})
	if err := result(ctx, "Probe", subject{}, err); err != nil {
		return false, err
	}
	// The spec lets a plugin leave ready unset, meaning ready.
	if resp.GetReady() == nil {
		return true, nil
	}
	return resp.GetReady().GetValue(), nil
}
