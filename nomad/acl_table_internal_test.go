package nomad

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

type unruledEndpoint struct{}

func (unruledEndpoint) Frobnicate(args *structs.GenericRequest, reply *structs.GenericResponse) error {
	return nil
}

// The server refuses to start with an RPC method that has no row in the
// endpoint table: the check catches the bug it exists for.
func TestCheckRPCTable_RefusesMethodWithoutRow(t *testing.T) {
	err := checkRPCTable(map[string]any{"Status": &Status{}, "Job": unruledEndpoint{}})
	must.ErrorContains(t, err, "Job.Frobnicate has no row in the endpoint table")
	must.NoError(t, checkRPCTable(map[string]any{"Status": &Status{}, "ACL": &ACL{}}))
}
