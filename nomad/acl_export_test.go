package nomad

import "reflect"

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
