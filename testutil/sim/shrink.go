package sim

// Shrink returns a smaller list of ops for which fails still reports true,
// by delta debugging (ddmin): it tries dropping chunks of ops, halving the
// chunk size when nothing can go, until single ops cannot be dropped or
// budget runs (each run of fails counts; schedules are not free).
func Shrink(ops []Op, fails func([]Op) bool, budget int) []Op {
	n := 2
	for len(ops) >= 2 && budget > 0 {
		chunk := (len(ops) + n - 1) / n
		reduced := false
		for start := 0; start < len(ops) && budget > 0; start += chunk {
			end := min(start+chunk, len(ops))
			cand := append(append([]Op{}, ops[:start]...), ops[end:]...)
			budget--
			if fails(cand) {
				ops, n, reduced = cand, max(n-1, 2), true
				break
			}
		}
		if !reduced {
			if chunk == 1 {
				break
			}
			n = min(n*2, len(ops))
		}
	}
	return ops
}
