package command

import "errors"

// listing describes one kind of object that a status command lists, and
// that commands look up by ID or unique prefix: jobs, nodes, plugins and
// volumes.
type listing[T any] struct {
	// kind is the object's name, singular and lowercase: "job". It names
	// the list in errors ("listing jobs") and the command that lists the
	// objects ('berth job status').
	kind string
	// none is what an empty list prints: "No running jobs".
	none string
	id   func(T) string
	// sort orders a list in place, as the table and -json show it.
	sort func([]T)
	// rows is a list's table, header first.
	rows func([]T) [][]string
}

// print prints a list the servers returned, err being the error of that
// call: -json and -t see the whole list, an empty one as [] and never as
// null; otherwise it is a table, or none. It returns the exit code.
func (l listing[T]) print(m *Meta, items []T, err error) int {
	if err != nil {
		m.ui.Error("%s", m.apiErr("listing "+l.kind+"s", err))
		return 1
	}
	if items == nil {
		items = []T{}
	}
	l.sort(items)
	if done, err := m.formatted(items); done {
		return m.fmtResult(err)
	}
	if len(items) == 0 {
		m.ui.Output("%s", l.none)
		return 0
	}
	m.ui.Output("%s", table(l.rows(items)))
	return 0
}

// resolve picks the object that id names, exactly or as a unique prefix
// (see pickByPrefix), from the objects the servers listed for prefix id,
// err being the error of that call. The error says when id matched nothing
// or several objects (listing them).
func (l listing[T]) resolve(m *Meta, id string, items []T, err error) (T, error) {
	var none T
	if err != nil {
		return none, errors.New(m.apiErr("listing "+l.kind+"s", err))
	}
	one, matches, ok := pickByPrefix(id, items, l.id)
	if !ok {
		if len(matches) == 0 {
			return none, notFound(l.kind, id, "berth "+l.kind+" status")
		}
		l.sort(matches)
		return none, ambiguous(l.kind, id, l.rows(matches))
	}
	return one, nil
}
