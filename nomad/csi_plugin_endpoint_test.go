package nomad_test

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil/cluster"
)

func TestCSIPlugin_GetAndList(t *testing.T) {
	s := cluster.NewServer(t, nil)
	registerPluginNode(t, s, 1, "hostpath", "nfs")
	registerPluginNode(t, s, 2, "hostpath")

	var one structs.CSIPluginGetResponse
	must.NoError(t, s.RPC("CSIPlugin.Get", &structs.CSIPluginGetRequest{ID: "hostpath"}, &one))
	must.NotNil(t, one.Plugin)
	must.Eq(t, 2, one.Plugin.NodesHealthy)
	must.Eq(t, 2, one.Plugin.NodesExpected)
	must.MapLen(t, 2, one.Plugin.Nodes)
	must.Eq(t, "org.example.hostpath", one.Plugin.Provider)
	must.NoError(t, s.RPC("CSIPlugin.Get", &structs.CSIPluginGetRequest{ID: "nfs"}, &one))
	must.Eq(t, "nfs", one.Plugin.ID)
	must.NoError(t, s.RPC("CSIPlugin.Get", &structs.CSIPluginGetRequest{ID: "nf"}, &one))
	must.Nil(t, one.Plugin, must.Sprint("reads are exact"))
	must.NoError(t, s.RPC("CSIPlugin.Get", &structs.CSIPluginGetRequest{ID: "nope"}, &one))
	must.Nil(t, one.Plugin)

	var list structs.CSIPluginListResponse
	must.NoError(t, s.RPC("CSIPlugin.List", &structs.GenericRequest{}, &list))
	must.SliceLen(t, 2, list.Plugins)
	must.Eq(t, "hostpath", list.Plugins[0].ID)
	must.NoError(t, s.RPC("CSIPlugin.List", &structs.GenericRequest{QueryOptions: structs.QueryOptions{Filter: `NodesHealthy == 1`}}, &list))
	must.SliceLen(t, 1, list.Plugins)
	must.Eq(t, "nfs", list.Plugins[0].ID)
	must.NoError(t, s.RPC("CSIPlugin.List", &structs.GenericRequest{QueryOptions: structs.QueryOptions{PerPage: 1}}, &list))
	must.Eq(t, "nfs", list.NextToken)
}
