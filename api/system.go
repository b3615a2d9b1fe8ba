package api

// System is the /v1/system endpoints.
type System struct{ c *Client }

// System returns the system endpoints.
func (c *Client) System() *System { return &System{c: c} }

// GarbageCollect runs the servers' garbage collection of terminal evals,
// allocs, jobs, claims and plugins now (PUT /v1/system/gc).
func (s *System) GarbageCollect() error {
	_, err := s.c.write("PUT", "/v1/system/gc", nil, nil, nil)
	return err
}
