package state

import (
	"testing"

	"github.com/hashicorp/go-memdb"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

// TestVolumeIndexes_SameKeysAsReflection holds the csi_volumes indexers
// written without reflection to the keys (and refusals) of the memdb
// indexers they replaced: CompoundIndex{Namespace, ID} and
// StringFieldIndex{PluginID}.
func TestVolumeIndexes_SameKeysAsReflection(t *testing.T) {
	refID := &memdb.CompoundIndex{Indexes: []memdb.Indexer{
		&memdb.StringFieldIndex{Field: "Namespace"}, &memdb.StringFieldIndex{Field: "ID"},
	}}
	refPlugin := &memdb.StringFieldIndex{Field: "PluginID"}
	strs := []string{"", "default", "a", "vol-0001", "ns\x00x", "ünï"}
	for _, ns := range strs {
		for _, id := range strs {
			vol := &structs.CSIVolume{Namespace: ns, ID: id, PluginID: id}
			okR, keyR, errR := refID.FromObject(vol)
			ok, key, err := volumeIDIndex{}.FromObject(vol)
			must.Eq(t, errR == nil, err == nil)
			must.Eq(t, okR, ok, must.Sprintf("%q %q", ns, id))
			must.Eq(t, keyR, key, must.Sprintf("%q %q", ns, id))

			keyR, errR = refID.FromArgs(ns, id)
			key, err = volumeIDIndex{}.FromArgs(ns, id)
			must.Eq(t, errR == nil, err == nil)
			must.Eq(t, keyR, key, must.Sprintf("%q %q", ns, id))

			keyR, errR = refID.PrefixFromArgs(ns, id)
			key, err = volumeIDIndex{}.PrefixFromArgs(ns, id)
			must.Eq(t, errR == nil, err == nil)
			must.Eq(t, string(keyR), string(key), must.Sprintf("prefix %q %q", ns, id))

			okR, keyR, errR = refPlugin.FromObject(vol)
			ok, key, err = volumePluginIndex{}.FromObject(vol)
			must.Eq(t, errR == nil, err == nil)
			must.Eq(t, okR, ok)
			must.Eq(t, keyR, key)
		}
		keyR, errR := refID.PrefixFromArgs(ns)
		key, err := volumeIDIndex{}.PrefixFromArgs(ns)
		must.Eq(t, errR == nil, err == nil)
		must.Eq(t, string(keyR), string(key), must.Sprintf("prefix %q", ns))

		keyR, errR = refPlugin.FromArgs(ns)
		key, err = volumePluginIndex{}.FromArgs(ns)
		must.Eq(t, errR == nil, err == nil)
		must.Eq(t, keyR, key)
	}
	keyR, _ := refID.PrefixFromArgs()
	key, _ := volumeIDIndex{}.PrefixFromArgs()
	must.Eq(t, len(keyR), len(key))

	// Refused as the reflection indexers refuse them.
	for _, args := range [][]any{{"default"}, {"default", 1}, {1, "x"}, {"a", "b", "c"}} {
		_, errR := refID.FromArgs(args...)
		_, err := volumeIDIndex{}.FromArgs(args...)
		must.Error(t, errR)
		must.Error(t, err)
	}
	for _, args := range [][]any{{1}, {"a", 2}, {"a", "b", "c"}} {
		_, errR := refID.PrefixFromArgs(args...)
		_, err := volumeIDIndex{}.PrefixFromArgs(args...)
		must.Error(t, errR)
		must.Error(t, err)
	}
	_, err := volumePluginIndex{}.FromArgs(1)
	must.Error(t, err)
	_, _, err = volumeIDIndex{}.FromObject(&structs.CSIPlugin{})
	must.Error(t, err)
}
