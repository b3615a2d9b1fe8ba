package structs

// Caps on the size of what one request may ask for. Each stops a single
// request from costing the servers unbounded memory or CPU (a Count of
// 2^31 once pinned both cores and grew a server to 8.9 GB); the error
// names the cap, so a user who truly needs more splits the request.
const (
	// MaxGroupCount caps a task group's count.
	MaxGroupCount = 10_000
	// MaxTaskGroups caps the groups in one job.
	MaxTaskGroups = 100
	// MaxTasksPerGroup caps the tasks in one group.
	MaxTasksPerGroup = 100
	// MaxItemsPerRequest caps the objects (volumes, IDs) one write names.
	MaxItemsPerRequest = 1_000
	// MaxMapBytes caps the keys and values of one user-supplied string
	// map (meta, env, a volume's parameters or context).
	MaxMapBytes = 64 << 10
)

// mapBytes is the total length of m's keys and values.
func mapBytes(m map[string]string) int {
	n := 0
	for k, v := range m {
		n += len(k) + len(v)
	}
	return n
}
