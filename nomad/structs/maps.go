package structs

import "reflect"

// mapStringAny makes msgpack decode untyped maps (task driver config) as
// map[string]any instead of map[any]any, so they survive a round trip into
// JSON.
var mapStringAny = reflect.TypeOf(map[string]any(nil))
