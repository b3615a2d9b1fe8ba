package nomad

import (
	"reflect"

	"github.com/berth-io/berth/nomad/structs"
)

// RPCArgTypesForTest maps every method the RPC server exposes to the type
// of its args, so the endpoint×token test can call each one.
func (s *Server) RPCArgTypesForTest() map[string][2]reflect.Type {
	out := map[string][2]reflect.Type{}
	for name, ep := range s.endpoints() {
		t := reflect.TypeOf(ep)
		for _, m := range exportedRPCMethods(ep) {
			mt, _ := t.MethodByName(m)
			out[name+"."+m] = [2]reflect.Type{mt.Type.In(1), mt.Type.In(2)}
		}
	}
	return out
}

// FSMForTest exposes the FSM for snapshot tests.
func (s *Server) FSMForTest() *FSM { return s.fsm }

// ForwardForTest runs the forwarding half of an endpoint on s.
func (s *Server) ForwardForTest(method string, args structs.RPCInfo, reply any) (bool, error) {
	return s.forward(method, args, args, reply)
}
