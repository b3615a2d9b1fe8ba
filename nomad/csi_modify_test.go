package nomad_test

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil"
)

// Re-running create with changed mutable_parameters sets the changed ones
// through the controller (ControllerModifyVolume) and records them; a
// plugin without MODIFY_VOLUME is refused with the fix before anything is
// called, and a plugin's refusal is recorded and reported.
func TestCSIVolumeCreate_ModifiesMutableParameters(t *testing.T) {
	s := csiServer(t, nil, nil)
	node := controllerNode(0)
	joinNode(t, s, node)
	ctrl := &fakeController{externalID: "pv-1"}
	openSession(t, s, node, node.SecretID, ctrl)
	var last structs.CSIVolumeCreateResponse
	create := func(mutable map[string]string) error {
		vol := testVolume("db", hostpath)
		vol.MutableParameters = mutable
		last = structs.CSIVolumeCreateResponse{}
		return s.RPC("CSIVolume.Create", &structs.CSIVolumeCreateRequest{Volumes: []*structs.CSIVolume{vol}}, &last)
	}

	// A new volume with mutable_parameters needs MODIFY_VOLUME.
	err := create(map[string]string{"note": "a"})
	must.ErrorIs(t, err, structs.ErrInvalid)
	must.StrContains(t, err.Error(), "no MODIFY_VOLUME capability")
	testutil.WaitForResult(t, func() (bool, error) {
		err := create(nil)
		return err == nil, err
	})
	must.SliceEmpty(t, ctrl.modifies())

	err = create(map[string]string{"note": "a"})
	must.ErrorIs(t, err, structs.ErrInvalid)
	must.StrContains(t, err.Error(), "no MODIFY_VOLUME capability")
	must.StrContains(t, err.Error(), `note="a"`)
	must.SliceEmpty(t, ctrl.modifies())
	must.MapEmpty(t, getVolume(t, s, "", "db").MutableParameters)

	node.CSIControllerPlugins[hostpath].ControllerInfo.SupportsModify = true
	joinNode(t, s, node)
	testutil.WaitForResult(t, func() (bool, error) {
		err := create(map[string]string{"note": "a", "tier": "x"})
		return err == nil, err
	})
	mods := ctrl.modifies()
	must.SliceLen(t, 1, mods)
	must.Eq(t, "pv-1", mods[0].ExternalID)
	must.Eq(t, map[string]string{"note": "a", "tier": "x"}, mods[0].MutableParameters)
	got := getVolume(t, s, "", "db")
	must.Eq(t, map[string]string{"note": "a", "tier": "x"}, got.MutableParameters)
	must.NotNil(t, got.Modification)
	must.Eq(t, "", got.Modification.Error)
	must.Positive(t, got.Modification.Time)

	// Only the changed parameter is sent; the one left out keeps its value.
	must.NoError(t, create(map[string]string{"note": "b"}))
	must.Eq(t, []string{structs.CSIVolumeModified}, last.Outcomes, must.Sprint("the reply says the volume was modified, not created"))
	mods = ctrl.modifies()
	must.SliceLen(t, 2, mods)
	must.Eq(t, map[string]string{"note": "b"}, mods[1].MutableParameters)
	must.Eq(t, map[string]string{"note": "b", "tier": "x"}, getVolume(t, s, "", "db").MutableParameters)

	// Nothing changed: nothing to do (the create conflict, as before).
	err = create(map[string]string{"note": "b"})
	must.ErrorIs(t, err, structs.ErrConflict)
	must.SliceLen(t, 2, ctrl.modifies())

	// The plugin refuses: the error names the volume and the parameter, the
	// refusal is recorded, the values stay.
	ctrl.script("Modify", structs.NewError(structs.CodeInvalid, `rpc error: code = InvalidArgument desc = mutable parameter "iops" is not supported`))
	err = create(map[string]string{"iops": "9000"})
	must.ErrorIs(t, err, structs.ErrInvalid)
	must.StrContains(t, err.Error(), `modifying volume "db"`)
	must.StrContains(t, err.Error(), `"iops" is not supported`)
	got = getVolume(t, s, "", "db")
	must.Eq(t, map[string]string{"note": "b", "tier": "x"}, got.MutableParameters)
	must.StrContains(t, got.Modification.Error, `"iops" is not supported`)
	must.Eq(t, map[string]string{"iops": "9000"}, got.Modification.Parameters)
}

// Registering again with changed mutable_parameters modifies the volume
// by the same path; a spec without them keeps the recorded ones; a new
// registration's are set on the provider's volume before it is recorded.
func TestCSIVolumeRegister_ModifiesMutableParameters(t *testing.T) {
	s := csiServer(t, nil, nil)
	node := controllerNode(0)
	node.CSIControllerPlugins[hostpath].ControllerInfo.SupportsModify = true
	joinNode(t, s, node)
	ctrl := &fakeController{}
	openSession(t, s, node, node.SecretID, ctrl)
	register := func(mutable map[string]string) error {
		vol := testVolume("db", hostpath)
		vol.ExternalID = "pv-db"
		vol.MutableParameters = mutable
		return s.RPC("CSIVolume.Register", &structs.CSIVolumeRegisterRequest{Volumes: []*structs.CSIVolume{vol}}, &structs.CSIVolumeRegisterResponse{})
	}
	testutil.WaitForResult(t, func() (bool, error) {
		err := register(map[string]string{"note": "a"})
		return err == nil, err
	})
	mods := ctrl.modifies()
	must.SliceLen(t, 1, mods)
	must.Eq(t, "pv-db", mods[0].ExternalID)
	must.Eq(t, map[string]string{"note": "a"}, getVolume(t, s, "", "db").MutableParameters)

	must.NoError(t, register(nil))
	must.SliceLen(t, 1, ctrl.modifies())
	must.Eq(t, map[string]string{"note": "a"}, getVolume(t, s, "", "db").MutableParameters)

	must.NoError(t, register(map[string]string{"note": "b"}))
	mods = ctrl.modifies()
	must.SliceLen(t, 2, mods)
	must.Eq(t, map[string]string{"note": "b"}, mods[1].MutableParameters)
	got := getVolume(t, s, "", "db")
	must.Eq(t, map[string]string{"note": "b"}, got.MutableParameters)
	must.Eq(t, map[string]string{"note": "b"}, got.Modification.Parameters)

	ctrl.script("Modify", structs.NewError(structs.CodeInvalid, "rpc error: code = InvalidArgument desc = bad note"))
	err := register(map[string]string{"note": "c"})
	must.ErrorIs(t, err, structs.ErrInvalid)
	must.StrContains(t, err.Error(), "bad note")
	must.StrContains(t, err.Error(), "berth volume register")
	must.Eq(t, map[string]string{"note": "b"}, getVolume(t, s, "", "db").MutableParameters)
}
