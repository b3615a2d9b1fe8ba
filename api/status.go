package api

// Status reads the cluster's leader and peers.
type Status struct{ c *Client }

// Status returns the status endpoints.
func (c *Client) Status() *Status { return &Status{c: c} }

// Leader returns the leader's RPC address.
func (s *Status) Leader() (string, error) {
	var leader string
	_, err := s.c.query("/v1/status/leader", &leader, nil)
	return leader, err
}

// Peers returns the Raft peers' addresses.
func (s *Status) Peers() ([]string, error) {
	var peers []string
	_, err := s.c.query("/v1/status/peers", &peers, nil)
	return peers, err
}
