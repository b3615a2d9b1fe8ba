package agent

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/nomad"
)

// Job diffs, in the shape of Nomad's (what `job plan` prints): a tree of
// objects whose leaves are fields with an old and a new value, each node
// typed Added, Deleted, Edited or None. Task groups and tasks are matched
// by name; other lists by position.

// Diff types, as Nomad names them.
const (
	diffAdded   = "Added"
	diffDeleted = "Deleted"
	diffEdited  = "Edited"
	diffNone    = "None"
)

// The diff types are the API's: the CLI decodes what this file builds.
type (
	JobDiff       = api.JobDiff
	TaskGroupDiff = api.TaskGroupDiff
	TaskDiff      = api.TaskDiff
	FieldDiff     = api.FieldDiff
	ObjectDiff    = api.ObjectDiff
)

// serverOwned are fields of a job the servers set: they are not part of
// what a user changes, so they never show in a diff.
var serverOwned = map[string]bool{
	"Status": true, "StatusDescription": true, "Stable": true, "Version": true, "SubmitTime": true,
	"CreateIndex": true, "ModifyIndex": true, "JobModifyIndex": true, "ParentID": true,
	// Listed apart below.
	"TaskGroups": true, "Tasks": true,
}

// diffJobs is the diff from old (nil: not registered) to new (nil:
// removed). Both are the API form of the servers' jobs, so defaults filled
// at registration do not show as changes.
func diffJobs(old, new *api.Job, updates map[string]*nomad.DesiredUpdates) *JobDiff {
	out := &JobDiff{}
	switch {
	case old == nil && new == nil:
		out.Type = diffNone
		return out
	case new != nil:
		out.ID = deref(new.ID)
	default:
		out.ID = deref(old.ID)
	}
	out.Fields, out.Objects = diffStruct(valueOf(old), valueOf(new))
	groups := map[string][2]*api.TaskGroup{}
	var names []string
	add := func(tgs []*api.TaskGroup, side int) {
		for _, tg := range tgs {
			if tg == nil {
				continue
			}
			n := deref(tg.Name)
			pair, seen := groups[n]
			if !seen {
				names = append(names, n)
			}
			pair[side] = tg
			groups[n] = pair
		}
	}
	if old != nil {
		add(old.TaskGroups, 0)
	}
	if new != nil {
		add(new.TaskGroups, 1)
	}
	sort.Strings(names)
	for _, n := range names {
		pair := groups[n]
		out.TaskGroups = append(out.TaskGroups, diffGroup(n, pair[0], pair[1], updates[n]))
	}
	out.Type = typeOf(old != nil, new != nil, out.Fields, out.Objects, func() bool {
		for _, tg := range out.TaskGroups {
			if tg.Type != diffNone {
				return true
			}
		}
		return false
	})
	return out
}

func diffGroup(name string, old, new *api.TaskGroup, u *nomad.DesiredUpdates) *TaskGroupDiff {
	out := &TaskGroupDiff{Name: name}
	out.Fields, out.Objects = diffStruct(valueOf(old), valueOf(new))
	tasks := map[string][2]*api.Task{}
	var names []string
	add := func(ts []*api.Task, side int) {
		for _, t := range ts {
			if t == nil {
				continue
			}
			pair, seen := tasks[t.Name]
			if !seen {
				names = append(names, t.Name)
			}
			pair[side] = t
			tasks[t.Name] = pair
		}
	}
	if old != nil {
		add(old.Tasks, 0)
	}
	if new != nil {
		add(new.Tasks, 1)
	}
	sort.Strings(names)
	for _, n := range names {
		pair := tasks[n]
		td := &TaskDiff{Name: n}
		td.Fields, td.Objects = diffStruct(valueOf(pair[0]), valueOf(pair[1]))
		td.Type = typeOf(pair[0] != nil, pair[1] != nil, td.Fields, td.Objects, nil)
		out.Tasks = append(out.Tasks, td)
	}
	out.Type = typeOf(old != nil, new != nil, out.Fields, out.Objects, func() bool {
		for _, t := range out.Tasks {
			if t.Type != diffNone {
				return true
			}
		}
		return false
	})
	if u != nil {
		out.Updates = map[string]uint64{}
		for k, v := range map[string]uint64{
			"ignore": u.Ignore, "create": u.Place, "migrate": u.Migrate, "destroy": u.Stop,
			"in-place update": u.InPlaceUpdate, "create/destroy update": u.DestructiveUpdate,
			"canary": u.Canary, "preemptions": u.Preemptions,
		} {
			if v > 0 {
				out.Updates[k] = v
			}
		}
	}
	return out
}

// typeOf is an object's diff type from whether it exists on each side and
// whether anything under it changed.
func typeOf(hasOld, hasNew bool, fields []*FieldDiff, objects []*ObjectDiff, more func() bool) string {
	switch {
	case !hasOld && hasNew:
		return diffAdded
	case hasOld && !hasNew:
		return diffDeleted
	case !hasOld && !hasNew:
		return diffNone
	}
	for _, f := range fields {
		if f.Type != diffNone {
			return diffEdited
		}
	}
	for _, o := range objects {
		if o.Type != diffNone {
			return diffEdited
		}
	}
	if more != nil && more() {
		return diffEdited
	}
	return diffNone
}

// valueOf is the struct a pointer points to, or the zero Value for nil.
func valueOf(p any) reflect.Value {
	v := reflect.ValueOf(p)
	for v.IsValid() && v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	return v
}

// diffStruct diffs two values of one struct type (either may be the zero
// Value: absent). Scalars become fields; structs, maps and lists become
// objects named after the field.
func diffStruct(old, new reflect.Value) ([]*FieldDiff, []*ObjectDiff) {
	var typ reflect.Type
	switch {
	case old.IsValid():
		typ = old.Type()
	case new.IsValid():
		typ = new.Type()
	default:
		return nil, nil
	}
	var fields []*FieldDiff
	var objects []*ObjectDiff
	for i := 0; i < typ.NumField(); i++ {
		sf := typ.Field(i)
		if !sf.IsExported() || serverOwned[sf.Name] {
			continue
		}
		var o, n reflect.Value
		if old.IsValid() {
			o = old.Field(i)
		}
		if new.IsValid() {
			n = new.Field(i)
		}
		if ft := sf.Type; isScalarKind(ft.Kind()) || (ft.Kind() == reflect.Pointer && isScalarKind(ft.Elem().Kind())) {
			if f := diffScalar(sf.Name, o, n); f != nil {
				fields = append(fields, f)
			}
			continue
		}
		if obj := diffObject(sf.Name, o, n); obj != nil {
			objects = append(objects, obj)
		}
	}
	return fields, objects
}

// diffScalar diffs a scalar field (or pointer to one); nil when it is
// absent on both sides.
func diffScalar(name string, o, n reflect.Value) *FieldDiff {
	os, oSet := scalar(o)
	ns, nSet := scalar(n)
	f := &FieldDiff{Name: name, Old: os, New: ns}
	switch {
	case !oSet && !nSet:
		return nil
	case !oSet:
		f.Type = diffAdded
	case !nSet:
		f.Type = diffDeleted
	case os != ns:
		f.Type = diffEdited
	default:
		f.Type = diffNone
	}
	return f
}

// scalar formats a scalar value; set is false for an absent or nil one.
func scalar(v reflect.Value) (s string, set bool) {
	if !v.IsValid() || (v.Kind() == reflect.Pointer && v.IsNil()) {
		return "", false
	}
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	return fmt.Sprint(v.Interface()), true
}

func isScalarKind(k reflect.Kind) bool {
	switch k {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// diffObject diffs a struct, map or list field; nil when it is absent or
// empty on both sides.
func diffObject(name string, o, n reflect.Value) *ObjectDiff {
	flatO, flatN := map[string]string{}, map[string]string{}
	flatten("", o, flatO)
	flatten("", n, flatN)
	if len(flatO) == 0 && len(flatN) == 0 {
		return nil
	}
	obj := &ObjectDiff{Name: name}
	keys := make([]string, 0, len(flatO)+len(flatN))
	for k := range flatO {
		keys = append(keys, k)
	}
	for k := range flatN {
		if _, ok := flatO[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		ov, inO := flatO[k]
		nv, inN := flatN[k]
		f := &FieldDiff{Name: k, Old: ov, New: nv, Type: diffNone}
		switch {
		case !inO:
			f.Type = diffAdded
		case !inN:
			f.Type = diffDeleted
		case ov != nv:
			f.Type = diffEdited
		}
		obj.Fields = append(obj.Fields, f)
	}
	obj.Type = typeOf(len(flatO) > 0, len(flatN) > 0, obj.Fields, nil, nil)
	return obj
}

// flatten writes every scalar under v into out, keyed by its path
// ("MountOptions.FSType", "Datacenters[0]", "Meta[owner]").
func flatten(prefix string, v reflect.Value, out map[string]string) {
	if !v.IsValid() {
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			flatten(prefix, v.Elem(), out)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			sf := v.Type().Field(i)
			if sf.IsExported() {
				flatten(join(prefix, sf.Name), v.Field(i), out)
			}
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			flatten(prefix+"["+fmt.Sprint(k.Interface())+"]", v.MapIndex(k), out)
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			flatten(prefix+"["+strconv.Itoa(i)+"]", v.Index(i), out)
		}
	default:
		if isScalarKind(v.Kind()) {
			out[strings.TrimPrefix(prefix, ".")] = fmt.Sprint(v.Interface())
		}
	}
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}
