package nomad

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/berth-io/berth/nomad/structs"
)

// The endpoints about the cluster itself: Operator (Raft membership),
// Status (ping, leader, peers) and System (maintenance).

// Operator holds cluster administration endpoints.
type Operator struct {
	srv *Server
}

// RaftGetConfiguration lists the Raft peers and which one leads.
func (op *Operator) RaftGetConfiguration(args *structs.GenericRequest, reply *structs.RaftConfigurationResponse) (err error) {
	defer wire(&err)
	if done, err := op.srv.forward("Operator.RaftGetConfiguration", args, args, reply); done {
		return err
	}
	f := op.srv.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	leaderAddr, _ := op.srv.raft.LeaderWithID()
	reply.Index = f.Index()
	reply.Servers = nil
	for _, srv := range f.Configuration().Servers {
		reply.Servers = append(reply.Servers, &structs.RaftPeer{
			ID:       string(srv.ID),
			Address:  string(srv.Address),
			Leader:   srv.Address == leaderAddr,
			Voter:    srv.Suffrage == raft.Voter,
			NodeName: op.peerName(string(srv.ID), string(srv.Address)),
		})
	}
	return nil
}

// peerName asks a peer for its node name (Raft stores only IDs and
// addresses); an unreachable peer shows as "(unreachable)".
func (op *Operator) peerName(id, addr string) string {
	if id == op.srv.config.NodeID {
		return op.srv.config.NodeName
	}
	ctx, cancel := context.WithTimeout(op.srv.ctx, time.Second)
	defer cancel()
	var ping structs.PingResponse
	if err := op.srv.pool.RPC(ctx, addr, "Status.Ping", &structs.GenericRequest{}, &ping); err != nil || ping.ServerID != id {
		return "(unreachable)"
	}
	return ping.Name
}

// RaftAddPeer adds a voter. The new server must already be running with
// the same cluster's data (or empty), and BootstrapExpect 0.
func (op *Operator) RaftAddPeer(args *structs.RaftPeerRequest, reply *structs.GenericResponse) (err error) {
	defer wire(&err)
	if done, err := op.srv.forward("Operator.RaftAddPeer", args, args, reply); done {
		return err
	}
	if args.Address == "" {
		return structs.NewError(structs.CodeInvalid, "add-peer: missing peer address")
	}
	// Always ask the peer first: a voter at an address nothing answers
	// on can cost the cluster its quorum in one request. Its answer also
	// gives its ID, so operators need only the address. With TLS the
	// pool checks that the peer holds a server certificate, so a client
	// certificate never becomes a voter.
	ctx, cancel := context.WithTimeout(op.srv.ctx, 5*time.Second)
	defer cancel()
	var ping structs.PingResponse
	if err := op.srv.pool.RPC(ctx, args.Address, structs.MethodStatusPing, &structs.GenericRequest{}, &ping); err != nil {
		return structs.NewError(structs.CodeInvalid, "add-peer: no Berth server answers at %s (%v); start it first, then add it", args.Address, err)
	}
	id := args.ID
	if id == "" {
		id = ping.ServerID
	} else if id != ping.ServerID {
		return structs.NewError(structs.CodeInvalid, "add-peer: the server at %s has ID %s, not %s", args.Address, ping.ServerID, id)
	}
	f := op.srv.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(args.Address), 0, op.srv.config.RaftTimeout)
	if err := f.Error(); err != nil {
		return fmt.Errorf("adding raft peer %s (%s): %w", id, args.Address, err)
	}
	reply.Index = f.Index()
	return nil
}

// RaftRemovePeer removes a peer by ID or address.
func (op *Operator) RaftRemovePeer(args *structs.RaftPeerRequest, reply *structs.GenericResponse) (err error) {
	defer wire(&err)
	if done, err := op.srv.forward("Operator.RaftRemovePeer", args, args, reply); done {
		return err
	}
	f := op.srv.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	var id raft.ServerID
	for _, srv := range f.Configuration().Servers {
		if (args.ID != "" && string(srv.ID) == args.ID) || (args.Address != "" && string(srv.Address) == args.Address) {
			id = srv.ID
		}
	}
	if id == "" {
		return structs.NewError(structs.CodeNotFound, "remove-peer: no raft peer with id %q or address %q; see 'berth operator raft list-peers'", args.ID, args.Address)
	}
	rf := op.srv.raft.RemoveServer(id, 0, op.srv.config.RaftTimeout)
	if err := rf.Error(); err != nil {
		return fmt.Errorf("removing raft peer %s: %w", id, err)
	}
	reply.Index = rf.Index()
	return nil
}

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

// System runs cluster-wide maintenance ("System.*").
type System struct {
	srv *Server
}

// GarbageCollect runs the leader's garbage collection now instead of at
// its next interval: plugin GC deletes every plugin with no instance and
// no live claims on its volumes, whatever its threshold, and claim GC
// queues every volume with claims in the volumewatcher. It returns once
// the deletions are committed; claims are released by the watcher in the
// background, never by GC itself.
func (s *System) GarbageCollect(args *structs.GenericRequest, reply *structs.GenericResponse) (err error) {
	defer wire(&err)
	defer measureRPC("System.GarbageCollect", time.Now())
	args.AllowStale = false // only the leader collects
	if done, err := s.srv.forward("System.GarbageCollect", args, args, reply); done {
		return err
	}
	sc, err := s.srv.csiTerm()
	if err != nil {
		return err
	}
	ctx, cancel := s.srv.csiContext()
	defer cancel()
	index, err := s.srv.gcPlugins(ctx, nil, true)
	if err != nil {
		return fmt.Errorf("garbage collecting CSI plugins: %w", err)
	}
	if err := sc.volumes.EnqueueAll(); err != nil {
		return fmt.Errorf("garbage collecting CSI claims: %w", err)
	}
	reply.Index = max(index, s.srv.latestIndex())
	return nil
}
