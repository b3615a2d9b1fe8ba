package agent

import "github.com/berth-io/berth/api"

// registerAnswer is the answer of a volume register or create: it writes
// its own JSON (api's CSIVolumeRegisterResponse.AppendJSON, byte for byte
// encoding/json's).
type registerAnswer api.CSIVolumeRegisterResponse

func (r *registerAnswer) appendJSON(buf []byte) ([]byte, error) {
	return (*api.CSIVolumeRegisterResponse)(r).AppendJSON(buf)
}
