package agent

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/nomad/structs"
)

// Each controller capability the servers hold reaches the HTTP API and
// the CLI's capability list as its own name.
func TestCSIInfoToAPI_EveryControllerCapability(t *testing.T) {
	typ := reflect.TypeFor[structs.CSIControllerInfo]()
	seen := map[string]string{}
	for i := range typ.NumField() {
		var ci structs.CSIControllerInfo
		reflect.ValueOf(&ci).Elem().Field(i).SetBool(true)
		out := csiInfoToAPI(&structs.CSIInfo{PluginID: "p", ControllerInfo: &ci})
		names := out.ControllerInfo.Capabilities()
		must.SliceLen(t, 1, names, must.Sprintf("%s gives %v", typ.Field(i).Name, names))
		if prev, dup := seen[names[0]]; dup {
			t.Errorf("%s and %s both show as %s", prev, typ.Field(i).Name, names[0])
		}
		seen[names[0]] = typ.Field(i).Name
	}
	must.MapLen(t, 13, seen)

	ni := &api.CSINodeInfo{RequiresNodeStageVolume: true, SupportsCondition: true}
	must.Eq(t, []string{"STAGE_UNSTAGE_VOLUME", "VOLUME_CONDITION"}, ni.Capabilities())
}

// Lists answer [] when empty, optional lists stay null, and converted
// constraints are copies field for field.
func TestConvertHelpers(t *testing.T) {
	b, err := json.Marshal(allocStubsToAPI(nil))
	must.NoError(t, err)
	must.Eq(t, "[]", string(b))
	b, err = json.Marshal(evalsToAPI([]*structs.Evaluation{}))
	must.NoError(t, err)
	must.Eq(t, "[]", string(b))

	must.Nil(t, constraintsToAPI(nil))
	must.Nil(t, topologiesToAPI(nil))
	must.Nil(t, csiInfosToAPI(nil))

	cs := []*structs.Constraint{{LTarget: "${attr.kernel.name}", RTarget: "linux", Operand: "="}}
	must.Eq(t, []*api.Constraint{{LTarget: "${attr.kernel.name}", RTarget: "linux", Operand: "="}}, constraintsToAPI(cs))
	back := apiConstraintsToStructs([]*api.Constraint{{LTarget: "a", RTarget: "b", Operand: "!="}, nil})
	must.Eq(t, []*structs.Constraint{{LTarget: "a", RTarget: "b", Operand: "!="}, {}}, back)

	ts := apiTopologiesToStructs([]*api.CSITopology{{Segments: map[string]string{"zone": "a"}}, nil})
	must.Eq(t, []*structs.CSITopology{{Segments: map[string]string{"zone": "a"}}, nil}, ts)
}
