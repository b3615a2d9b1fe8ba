package nomad

import (
	"github.com/berth-io/berth/nomad/structs"
)

// Status answers questions about the cluster itself.
type Status struct {
	srv *Server
}

// Ping answers with this server's ID and address; peers use it to learn
// each other before bootstrapping.
func (st *Status) Ping(args *structs.GenericRequest, reply *structs.PingResponse) error {
	reply.ServerID = st.srv.config.NodeID
	reply.Addr = st.srv.rpcAdvert
	reply.Name = st.srv.config.NodeName
	return nil
}

// Leader returns the leader's RPC address, or "" when there is none.
func (st *Status) Leader(args *structs.GenericRequest, reply *structs.LeaderResponse) error {
	reply.Leader = st.srv.Leader()
	return nil
}

// Peers returns the addresses of the Raft voters.
func (st *Status) Peers(args *structs.GenericRequest, reply *structs.PeersResponse) (err error) {
	defer wire(&err)
	f := st.srv.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	reply.Peers = []string{}
	for _, srv := range f.Configuration().Servers {
		reply.Peers = append(reply.Peers, string(srv.Address))
	}
	return nil
}
