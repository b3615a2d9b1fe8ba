package nomad_test

import (
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil"
)

// Re-running create with a larger capacity_min expands the volume through
// the controller and records the step; without EXPAND_VOLUME, or asking
// to shrink, it is refused with the fix; a plugin that needs node
// expansion leaves the claim's node pending.
func TestCSIVolumeCreate_ExpandsALargerCapacity(t *testing.T) {
	s := csiServer(t, nil, nil)
	node := controllerNode(0)
	joinNode(t, s, node)
	ctrl := &fakeController{externalID: "pv-1"}
	openSession(t, s, node, node.SecretID, ctrl)
	create := func(min, max int64) (*structs.CSIVolumeCreateResponse, error) {
		vol := testVolume("db", hostpath)
		vol.RequestedCapacityMin, vol.RequestedCapacityMax = min, max
		var reply structs.CSIVolumeCreateResponse
		err := s.RPC("CSIVolume.Create", &structs.CSIVolumeCreateRequest{Volumes: []*structs.CSIVolume{vol}}, &reply)
		return &reply, err
	}
	testutil.WaitForResult(t, func() (bool, error) {
		reply, err := create(1<<30, 0)
		if err == nil {
			must.Eq(t, []string{structs.CSIVolumeCreated}, reply.Outcomes)
		}
		return err == nil, err
	})
	must.Eq(t, int64(1<<30), getVolume(t, s, "", "db").Capacity)

	// The controller does not advertise EXPAND_VOLUME.
	_, err := create(2<<30, 0)
	must.ErrorIs(t, err, structs.ErrInvalid)
	must.StrContains(t, err.Error(), "no EXPAND_VOLUME capability")
	must.SliceEmpty(t, ctrl.expands())

	node.CSIControllerPlugins[hostpath].ControllerInfo.SupportsExpand = true
	joinNode(t, s, node)
	ctrl.mu.Lock()
	ctrl.nodeExpansion = true
	ctrl.mu.Unlock()
	reply, err := create(2<<30, 0)
	must.NoError(t, err)
	must.Eq(t, []string{structs.CSIVolumeExpanded}, reply.Outcomes, must.Sprint("the reply says the volume was expanded, not created"))
	expands := ctrl.expands()
	must.SliceLen(t, 1, expands)
	must.Eq(t, int64(2<<30), expands[0].CapacityMin)
	must.Eq(t, "pv-1", expands[0].ExternalID)
	got := getVolume(t, s, "", "db")
	must.Eq(t, int64(2<<30), got.Capacity)
	must.Eq(t, got.Capacity, reply.Volumes[0].Capacity)
	must.NotNil(t, got.Expansion)
	must.True(t, got.Expansion.ControllerDone)
	must.True(t, got.Expansion.NodeRequired)
	must.Eq(t, int64(2<<30), got.Expansion.RequestedBytes)

	// Same size again: nothing to do, as before (a conflict naming the fix).
	_, err = create(2<<30, 0)
	must.ErrorIs(t, err, structs.ErrConflict)
	must.SliceLen(t, 1, ctrl.expands())

	// Shrinking is refused.
	_, err = create(0, 1<<30)
	must.ErrorIs(t, err, structs.ErrInvalid)
	must.True(t, strings.Contains(err.Error(), "never shrink"), must.Sprint(err))
	must.Eq(t, int64(2<<30), getVolume(t, s, "", "db").Capacity)

	// A failed controller expansion is recorded, and the capacity kept.
	ctrl.script("Expand", structs.NewError(structs.CodeInvalid, "rpc error: code = OutOfRange desc = too big"))
	_, err = create(8<<30, 0)
	must.ErrorIs(t, err, structs.ErrInvalid)
	got = getVolume(t, s, "", "db")
	must.Eq(t, int64(2<<30), got.Capacity)
	must.StrContains(t, got.Expansion.Error, "too big")
	must.False(t, got.Expansion.ControllerDone)
}

func (f *fakeController) expands() []*structs.ClientCSIControllerExpandRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*structs.ClientCSIControllerExpandRequest(nil), f.expand...)
}

// When the controller says node_expansion_required, each node with a live
// claim is asked to expand (CSINode.Expand over its session); a failure
// there is recorded and reported, and re-running create with the same
// spec retries the node step.
func TestCSIVolumeCreate_ExpandsOnTheClaimsNodes(t *testing.T) {
	s := csiServer(t, nil, nil)
	node := controllerNode(0)
	node.CSIControllerPlugins[hostpath].ControllerInfo.SupportsExpand = true
	joinNode(t, s, node)
	nodeEP := &fakeNodeEndpoint{errs: []error{structs.NewError(structs.CodeInvalid, "rpc error: code = Internal desc = resize2fs failed")}}
	ctrl := &fakeController{externalID: "pv-1", nodeExpansion: true, node: nodeEP}
	openSession(t, s, node, node.SecretID, ctrl)
	create := func(min int64) error {
		vol := testVolume("db", hostpath)
		vol.RequestedCapacityMin = min
		return s.RPC("CSIVolume.Create", &structs.CSIVolumeCreateRequest{Volumes: []*structs.CSIVolume{vol}}, &structs.CSIVolumeCreateResponse{})
	}
	testutil.WaitForResult(t, func() (bool, error) {
		err := create(1 << 30)
		return err == nil, err
	})
	a := claimedAlloc(t, s, "web")
	must.Eq(t, node.ID, a.NodeID)

	err := create(2 << 30)
	must.ErrorIs(t, err, structs.ErrRetryable)
	must.StrContains(t, err.Error(), "resize2fs failed")
	got := getVolume(t, s, "", "db")
	must.Eq(t, int64(2<<30), got.Capacity, must.Sprint("the controller step stands"))
	must.Eq(t, map[string]string{node.ID: "failed"}, got.Expansion.Nodes)
	must.StrContains(t, got.Expansion.Error, "resize2fs failed")
	must.Eq(t, 1, nodeEP.calls())

	must.NoError(t, create(2<<30), must.Sprint("the same spec retries the node step"))
	got = getVolume(t, s, "", "db")
	must.Eq(t, map[string]string{node.ID: "expanded"}, got.Expansion.Nodes)
	must.Eq(t, "", got.Expansion.Error)
	must.Eq(t, 2, nodeEP.calls())
	nodeEP.mu.Lock()
	must.Eq(t, int64(2<<30), nodeEP.expands[1].CapacityMin)
	must.Eq(t, "pv-1", nodeEP.expands[1].ExternalID)
	nodeEP.mu.Unlock()
}

// Registering a volume again with a larger capacity_min expands it through
// the same path as create (sizeChange, expandLocked): refused without
// EXPAND_VOLUME and when it would shrink, recorded when it grows; a spec
// registered again without capacity keeps the servers' capacity and
// expansion record.
func TestCSIVolumeRegister_ExpandsALargerCapacity(t *testing.T) {
	s := csiServer(t, nil, nil)
	node := controllerNode(0)
	joinNode(t, s, node)
	ctrl := &fakeController{externalID: "pv-1"}
	openSession(t, s, node, node.SecretID, ctrl)
	register := func(min, max int64) error {
		vol := testVolume("db", hostpath)
		vol.ExternalID = "pv-db"
		vol.RequestedCapacityMin, vol.RequestedCapacityMax = min, max
		return s.RPC("CSIVolume.Register", &structs.CSIVolumeRegisterRequest{Volumes: []*structs.CSIVolume{vol}}, &structs.CSIVolumeRegisterResponse{})
	}
	testutil.WaitForResult(t, func() (bool, error) {
		err := register(1<<30, 0)
		return err == nil, err
	})
	must.Eq(t, int64(1<<30), getVolume(t, s, "", "db").RequestedCapacityMin)

	err := register(2<<30, 0)
	must.ErrorIs(t, err, structs.ErrInvalid)
	must.StrContains(t, err.Error(), "no EXPAND_VOLUME capability")
	must.SliceEmpty(t, ctrl.expands())
	must.Eq(t, int64(1<<30), getVolume(t, s, "", "db").RequestedCapacityMin, must.Sprint("a refused expansion registers nothing"))

	node.CSIControllerPlugins[hostpath].ControllerInfo.SupportsExpand = true
	joinNode(t, s, node)
	// Re-joining may reopen the node's session: wait for it.
	testutil.WaitForResult(t, func() (bool, error) {
		err := register(2<<30, 0)
		return err == nil, err
	})
	expands := ctrl.expands()
	must.SliceLen(t, 1, expands)
	must.Eq(t, "pv-db", expands[0].ExternalID)
	must.Eq(t, int64(2<<30), expands[0].CapacityMin)
	got := getVolume(t, s, "", "db")
	must.Eq(t, int64(2<<30), got.Capacity)
	must.Eq(t, int64(2<<30), got.RequestedCapacityMin)
	must.True(t, got.Expansion.ControllerDone)

	// The same spec again changes nothing and keeps what the servers own.
	must.NoError(t, register(2<<30, 0))
	must.SliceLen(t, 1, ctrl.expands())
	got = getVolume(t, s, "", "db")
	must.Eq(t, int64(2<<30), got.Capacity)
	must.NotNil(t, got.Expansion)

	err = register(0, 1<<30)
	must.ErrorIs(t, err, structs.ErrInvalid)
	must.StrContains(t, err.Error(), "never shrink")

	// A plugin error is recorded and names the command that retries it.
	ctrl.script("Expand", structs.NewError(structs.CodeInvalid, "rpc error: code = OutOfRange desc = too big"))
	err = register(8<<30, 0)
	must.ErrorIs(t, err, structs.ErrInvalid)
	must.StrContains(t, err.Error(), "too big")
	must.StrContains(t, err.Error(), "berth volume register")
	got = getVolume(t, s, "", "db")
	must.Eq(t, int64(2<<30), got.Capacity)
	must.Eq(t, int64(2<<30), got.RequestedCapacityMin, must.Sprint("the failed expansion did not register the new spec"))
	must.StrContains(t, got.Expansion.Error, "too big")
}

// A controller whose ControllerGetCapabilities failed fingerprints
// unhealthy with every capability false. Seed 6719 showed the servers
// taking that for "the plugin cannot"; create, expand and modify must
// answer "retry once a controller is healthy", naming the controller and
// why, not refuse for good.
func TestCSIVolumeCreate_UnhealthyControllerCannotSay(t *testing.T) {
	s := csiServer(t, nil, nil)
	node := controllerNode(0)
	ctrlInfo := node.CSIControllerPlugins[hostpath]
	ctrlInfo.Healthy = false
	ctrlInfo.HealthDescription = "ControllerGetCapabilities failed: DeadlineExceeded: context deadline exceeded"
	ctrlInfo.ControllerInfo = &structs.CSIControllerInfo{}
	joinNode(t, s, node)
	openSession(t, s, node, node.SecretID, &fakeController{externalID: "pv-1"})
	vol := testVolume("db", hostpath)
	err := s.RPC("CSIVolume.Create", &structs.CSIVolumeCreateRequest{Volumes: []*structs.CSIVolume{vol}}, &structs.CSIVolumeCreateResponse{})
	must.ErrorIs(t, err, structs.ErrNotReady)
	for _, want := range []string{"CREATE_DELETE_VOLUME", "node " + node.ID, "ControllerGetCapabilities failed", "retry once one is healthy"} {
		must.StrContains(t, err.Error(), want)
	}

	// Healthy again with its capabilities: the create goes through.
	ctrlInfo.Healthy, ctrlInfo.HealthDescription = true, "healthy"
	ctrlInfo.ControllerInfo = &structs.CSIControllerInfo{SupportsCreateDelete: true, SupportsAttachDetach: true}
	joinNode(t, s, node)
	testutil.WaitForResult(t, func() (bool, error) {
		err := s.RPC("CSIVolume.Create", &structs.CSIVolumeCreateRequest{Volumes: []*structs.CSIVolume{testVolume("db", hostpath)}}, &structs.CSIVolumeCreateResponse{})
		return err == nil, err
	})
	must.Eq(t, "pv-1", getVolume(t, s, "", "db").ExternalID)
}
