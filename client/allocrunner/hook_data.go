package allocrunner

import "github.com/berth-io/berth/client/state"

// hookData is HookData over the client state.
type hookData struct {
	db      state.DB
	allocID string
}

func (d hookData) Load(hook string) ([]byte, error) { return d.db.GetHookData(d.allocID, hook) }

func (d hookData) Save(hook string, b []byte) error { return d.db.PutHookData(d.allocID, hook, b) }

func (d hookData) Delete(hook string) error { return d.db.DeleteHookData(d.allocID, hook) }
