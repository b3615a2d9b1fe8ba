package jobspec

import (
	"fmt"
	"math"
	"math/big"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// decoder walks one file's HCL bodies and collects every problem it
// finds, so a user sees them all at once.
type decoder struct {
	filename string
	src      []byte
	diags    hcl.Diagnostics
}

func newDecoder(filename string, src []byte) *decoder {
	return &decoder{filename: filename, src: src}
}

// errorf records a problem at rng. The summary says what is wrong and
// what was expected.
func (d *decoder) errorf(rng hcl.Range, format string, args ...any) {
	d.diags = append(d.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  fmt.Sprintf(format, args...),
		Subject:  &rng,
	})
}

// err returns every problem found so far, or nil.
func (d *decoder) err() error {
	return newError(d.filename, d.src, d.diags)
}

// fileStart is the position problems about the whole file point at.
func (d *decoder) fileStart() hcl.Range {
	return hcl.Range{Filename: d.filename, Start: hcl.InitialPos, End: hcl.InitialPos}
}

// blockSchema is a block type a body may hold.
type blockSchema struct {
	name   string
	labels []string
}

// schema is what a body may hold. Names in maps are string maps that may
// be written as a block (meta { k = "v" }) or as an argument
// (meta = { k = "v" }).
type schema struct {
	attrs  []string
	blocks []blockSchema
	maps   []string
}

// content is a body's arguments and blocks, by name.
type content struct {
	attrs  map[string]*hcl.Attribute
	blocks map[string][]*hcl.Block
}

// content reads body against s. Unknown arguments and blocks are problems
// (HCL's own "Unsupported argument" diagnostics, with suggestions).
func (d *decoder) content(body hcl.Body, s schema) *content {
	hs := &hcl.BodySchema{}
	for _, a := range s.attrs {
		hs.Attributes = append(hs.Attributes, hcl.AttributeSchema{Name: a})
	}
	native, _ := body.(*hclsyntax.Body)
	for _, m := range s.maps {
		if native != nil && native.Attributes[m] != nil {
			hs.Attributes = append(hs.Attributes, hcl.AttributeSchema{Name: m})
		} else {
			hs.Blocks = append(hs.Blocks, hcl.BlockHeaderSchema{Type: m})
		}
	}
	for _, b := range s.blocks {
		hs.Blocks = append(hs.Blocks, hcl.BlockHeaderSchema{Type: b.name, LabelNames: b.labels})
	}
	c, diags := body.Content(hs)
	d.diags = append(d.diags, diags...)
	out := &content{attrs: map[string]*hcl.Attribute{}, blocks: map[string][]*hcl.Block{}}
	if c == nil {
		return out
	}
	for name, a := range c.Attributes {
		out.attrs[name] = a
	}
	for _, b := range c.Blocks {
		// HCL reports blocks with the wrong number of labels; skip them
		// so no one indexes a missing label.
		if len(b.Labels) != len(labelsOf(s, b.Type)) {
			continue
		}
		out.blocks[b.Type] = append(out.blocks[b.Type], b)
	}
	return out
}

func labelsOf(s schema, name string) []string {
	for _, b := range s.blocks {
		if b.name == name {
			return b.labels
		}
	}
	return nil
}

// single returns the only block named name, reporting any duplicates.
func (d *decoder) single(c *content, name, owner string) *hcl.Block {
	bs := c.blocks[name]
	if len(bs) == 0 {
		return nil
	}
	for _, b := range bs[1:] {
		d.errorf(b.DefRange, "duplicate %s block: %s takes one, and the first is at line %d", name, owner, bs[0].DefRange.Start.Line)
	}
	return bs[0]
}

// missingIf reports a missing value at rng when cond holds (the value
// read is empty), unless a problem was recorded since there were n
// (reading the value failed, and said why).
func (d *decoder) missingIf(cond bool, n int, rng hcl.Range, format string, args ...any) {
	if cond && len(d.diags) == n {
		d.errorf(rng, format, args...)
	}
}

// value evaluates an argument. ok is false when the value is null (which
// counts as unset) or when evaluating failed (a problem was recorded).
func (d *decoder) value(expr hcl.Expression) (v cty.Value, ok bool) {
	var diags hcl.Diagnostics
	if se, isNative := expr.(hclsyntax.Expression); isNative {
		v, diags = d.eval(se)
	} else {
		// JSON: a nil context returns strings verbatim, so "${...}" in a
		// JSON file is kept as written.
		v, diags = expr.Value(nil)
	}
	d.diags = append(d.diags, diags...)
	if diags.HasErrors() {
		return cty.NilVal, false
	}
	if !v.IsWhollyKnown() {
		d.errorf(expr.Range(), "invalid value: want a literal value, not one computed from variables")
		return cty.NilVal, false
	}
	if v.IsNull() {
		return cty.NilVal, false
	}
	return v, true
}

// eval evaluates a native expression without variables or functions,
// except that interpolations of runtime variables in strings, such as
// "${node.unique.id}" or "${NOMAD_ALLOC_INDEX}", are kept as written: the
// client interpolates them when it runs the task.
func (d *decoder) eval(e hclsyntax.Expression) (cty.Value, hcl.Diagnostics) {
	switch e := e.(type) {
	case *hclsyntax.TemplateExpr:
		if e.IsStringLiteral() {
			return e.Value(nil)
		}
		var b strings.Builder
		var diags hcl.Diagnostics
		for _, part := range e.Parts {
			if s, ok := d.runtimeRef(part); ok {
				b.WriteString(s)
				continue
			}
			v, partDiags := d.eval(part)
			diags = append(diags, partDiags...)
			if partDiags.HasErrors() {
				continue
			}
			s, err := convert.Convert(v, cty.String)
			if err != nil || s.IsNull() || !s.IsKnown() {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "invalid template: want string values in interpolations",
					Subject:  part.Range().Ptr(),
				})
				continue
			}
			b.WriteString(s.AsString())
		}
		if diags.HasErrors() {
			return cty.DynamicVal, diags
		}
		return cty.StringVal(b.String()), diags
	case *hclsyntax.TemplateWrapExpr:
		if s, ok := d.runtimeRef(e.Wrapped); ok {
			return cty.StringVal(s), nil
		}
		return d.eval(e.Wrapped)
	case *hclsyntax.ParenthesesExpr:
		return d.eval(e.Expression)
	case *hclsyntax.ScopeTraversalExpr:
		// A bare variable: say how to pass it to the client instead.
		ref, _ := d.runtimeRef(e)
		return cty.DynamicVal, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  fmt.Sprintf("invalid value %s: variables are not allowed here", strings.TrimSuffix(strings.TrimPrefix(ref, "${"), "}")),
			Detail:   fmt.Sprintf("to have the client interpolate it, write it in a string: %q", ref),
			Subject:  e.Range().Ptr(),
		}}
	case *hclsyntax.TupleConsExpr:
		var diags hcl.Diagnostics
		vals := make([]cty.Value, 0, len(e.Exprs))
		for _, x := range e.Exprs {
			v, xd := d.eval(x)
			diags = append(diags, xd...)
			vals = append(vals, v)
		}
		if diags.HasErrors() {
			return cty.DynamicVal, diags
		}
		return cty.TupleVal(vals), diags
	case *hclsyntax.ObjectConsExpr:
		var diags hcl.Diagnostics
		attrs := make(map[string]cty.Value, len(e.Items))
		for _, item := range e.Items {
			k, kd := item.KeyExpr.Value(nil)
			diags = append(diags, kd...)
			if kd.HasErrors() {
				continue
			}
			ks, err := convert.Convert(k, cty.String)
			if err != nil || ks.IsNull() || !ks.IsKnown() {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "invalid object key: want a name or a string",
					Subject:  item.KeyExpr.Range().Ptr(),
				})
				continue
			}
			v, vd := d.eval(item.ValueExpr)
			diags = append(diags, vd...)
			attrs[ks.AsString()] = v
		}
		if diags.HasErrors() {
			return cty.DynamicVal, diags
		}
		return cty.ObjectVal(attrs), diags
	default:
		return e.Value(nil)
	}
}

// runtimeRef returns "${<source>}" when e is a reference to a variable,
// which only the client can resolve.
func (d *decoder) runtimeRef(e hclsyntax.Expression) (string, bool) {
	switch e.(type) {
	case *hclsyntax.ScopeTraversalExpr, *hclsyntax.RelativeTraversalExpr, *hclsyntax.IndexExpr:
	default:
		return "", false
	}
	r := e.Range()
	if r.Start.Byte < 0 || r.End.Byte > len(d.src) || r.Start.Byte > r.End.Byte {
		return "", false
	}
	return "${" + string(d.src[r.Start.Byte:r.End.Byte]) + "}", true
}

// describe renders a value for a message: strings quoted, numbers as
// written, other types by kind.
func describe(v cty.Value) string {
	if v.IsNull() || !v.IsKnown() {
		return "null"
	}
	switch ty := v.Type(); {
	case ty == cty.String:
		return fmt.Sprintf("%q", v.AsString())
	case ty == cty.Number:
		return v.AsBigFloat().Text('g', -1)
	case ty == cty.Bool:
		return fmt.Sprint(v.True())
	case ty.IsListType(), ty.IsTupleType(), ty.IsSetType():
		return "a list"
	case ty.IsMapType(), ty.IsObjectType():
		return "an object"
	}
	return "a value"
}

// str reads a string argument. Numbers and bools are accepted as their
// text, as HCL converts them.
func (d *decoder) str(a *hcl.Attribute) (string, bool) {
	if a == nil {
		return "", false
	}
	v, ok := d.value(a.Expr)
	if !ok {
		return "", false
	}
	s, err := convert.Convert(v, cty.String)
	if err != nil || s.IsNull() {
		d.errorf(a.Expr.Range(), "invalid %s: want a string, got %s", a.Name, describe(v))
		return "", false
	}
	return s.AsString(), true
}

// strPtr is str for pointer fields: nil when the argument is absent.
func (d *decoder) strPtr(a *hcl.Attribute) *string {
	if s, ok := d.str(a); ok {
		return &s
	}
	return nil
}

// oneOf reads a string argument that must be one of allowed.
func (d *decoder) oneOf(a *hcl.Attribute, allowed ...string) (string, bool) {
	s, ok := d.str(a)
	if !ok {
		return "", false
	}
	for _, x := range allowed {
		if s == x {
			return s, true
		}
	}
	d.errorf(a.Expr.Range(), "invalid %s %q: want one of %s", a.Name, s, strings.Join(allowed, ", "))
	return "", false
}

// number reads a numeric argument as a big.Float. Strings holding a
// number are accepted, as HCL converts them.
func (d *decoder) number(a *hcl.Attribute, want string) (*big.Float, cty.Value, bool) {
	v, ok := d.value(a.Expr)
	if !ok {
		return nil, cty.NilVal, false
	}
	n, err := convert.Convert(v, cty.Number)
	if err != nil || n.IsNull() {
		d.errorf(a.Expr.Range(), "invalid %s %s: want %s", a.Name, describe(v), want)
		return nil, v, false
	}
	return n.AsBigFloat(), v, true
}

// integer reads a whole-number argument in [lo, hi].
func (d *decoder) integer(a *hcl.Attribute, lo, hi int64) (int, bool) {
	if a == nil {
		return 0, false
	}
	want := fmt.Sprintf("a whole number from %d to %d", lo, hi)
	if hi == math.MaxInt32 {
		want = fmt.Sprintf("a whole number, %d or more", lo)
	}
	f, v, ok := d.number(a, want)
	if !ok {
		return 0, false
	}
	i, acc := f.Int64()
	if !f.IsInt() || acc != big.Exact || i < lo || i > hi {
		d.errorf(a.Expr.Range(), "invalid %s %s: want %s", a.Name, describe(v), want)
		return 0, false
	}
	return int(i), true
}

// intPtr is integer for pointer fields.
func (d *decoder) intPtr(a *hcl.Attribute, lo, hi int64) *int {
	if i, ok := d.integer(a, lo, hi); ok {
		return &i
	}
	return nil
}

// boolean reads a bool argument; "true" and "false" strings are accepted.
func (d *decoder) boolean(a *hcl.Attribute) (bool, bool) {
	if a == nil {
		return false, false
	}
	v, ok := d.value(a.Expr)
	if !ok {
		return false, false
	}
	b, err := convert.Convert(v, cty.Bool)
	if err != nil || b.IsNull() {
		d.errorf(a.Expr.Range(), "invalid %s %s: want true or false", a.Name, describe(v))
		return false, false
	}
	return b.True(), true
}

// boolPtr is boolean for pointer fields.
func (d *decoder) boolPtr(a *hcl.Attribute) *bool {
	if b, ok := d.boolean(a); ok {
		return &b
	}
	return nil
}

// strList reads a list of strings.
func (d *decoder) strList(a *hcl.Attribute) ([]string, bool) {
	if a == nil {
		return nil, false
	}
	v, ok := d.value(a.Expr)
	if !ok {
		return nil, false
	}
	ty := v.Type()
	if !ty.IsListType() && !ty.IsTupleType() && !ty.IsSetType() {
		d.errorf(a.Expr.Range(), "invalid %s %s: want a list of strings, e.g. [\"a\", \"b\"]", a.Name, describe(v))
		return nil, false
	}
	out := make([]string, 0, v.LengthInt())
	for it := v.ElementIterator(); it.Next(); {
		_, ev := it.Element()
		s, err := convert.Convert(ev, cty.String)
		if err != nil || s.IsNull() || !s.IsKnown() {
			d.errorf(a.Expr.Range(), "invalid %s: want a list of strings, but an element is %s", a.Name, describe(ev))
			return nil, false
		}
		out = append(out, s.AsString())
	}
	return out, true
}

// duration reads a duration written as a string, e.g. "30s" or "1h30m".
func (d *decoder) duration(a *hcl.Attribute) (time.Duration, bool) {
	if a == nil {
		return 0, false
	}
	v, ok := d.value(a.Expr)
	if !ok {
		return 0, false
	}
	const want = `want a duration like "30s", "5m" or "1h30m"`
	if v.Type() != cty.String {
		d.errorf(a.Expr.Range(), "invalid %s %s: %s", a.Name, describe(v), want)
		return 0, false
	}
	dur, err := time.ParseDuration(v.AsString())
	if err != nil || dur < 0 {
		d.errorf(a.Expr.Range(), "invalid %s %s: %s", a.Name, describe(v), want)
		return 0, false
	}
	return dur, true
}

// durationPtr is duration for pointer fields.
func (d *decoder) durationPtr(a *hcl.Attribute) *time.Duration {
	if dur, ok := d.duration(a); ok {
		return &dur
	}
	return nil
}

// size reads a size in bytes: a whole number, or a string like "10GiB".
func (d *decoder) size(a *hcl.Attribute) (int64, bool) {
	if a == nil {
		return 0, false
	}
	v, ok := d.value(a.Expr)
	if !ok {
		return 0, false
	}
	const want = `want a size like "10GiB" or "500MB", or a number of bytes`
	switch v.Type() {
	case cty.String:
		n, err := ParseSize(v.AsString())
		if err != nil {
			d.errorf(a.Expr.Range(), "invalid %s %s: %s", a.Name, describe(v), want)
			return 0, false
		}
		return n, true
	case cty.Number:
		f := v.AsBigFloat()
		i, acc := f.Int64()
		if !f.IsInt() || acc != big.Exact || i < 0 {
			d.errorf(a.Expr.Range(), "invalid %s %s: %s", a.Name, describe(v), want)
			return 0, false
		}
		return i, true
	}
	d.errorf(a.Expr.Range(), "invalid %s %s: %s", a.Name, describe(v), want)
	return 0, false
}

// stringMap reads a map of strings written as a block (meta { k = "v" })
// or as an argument (meta = { k = "v" }). Numbers and bools become text.
func (d *decoder) stringMap(c *content, name, owner string) map[string]string {
	if a := c.attrs[name]; a != nil {
		v, ok := d.value(a.Expr)
		if !ok {
			return nil
		}
		if !v.Type().IsObjectType() && !v.Type().IsMapType() {
			d.errorf(a.Expr.Range(), "invalid %s %s: want an object of strings, e.g. { key = \"value\" }", name, describe(v))
			return nil
		}
		out := make(map[string]string, v.LengthInt())
		for it := v.ElementIterator(); it.Next(); {
			k, ev := it.Element()
			s, err := convert.Convert(ev, cty.String)
			if err != nil || s.IsNull() || !s.IsKnown() {
				d.errorf(a.Expr.Range(), "invalid %s: want string values, but %q is %s", name, k.AsString(), describe(ev))
				continue
			}
			out[k.AsString()] = s.AsString()
		}
		return out
	}
	b := d.single(c, name, owner)
	if b == nil {
		return nil
	}
	attrs, diags := b.Body.JustAttributes()
	d.diags = append(d.diags, diags...)
	out := make(map[string]string, len(attrs))
	for _, a := range sortedAttrs(attrs) {
		if s, ok := d.str(a); ok {
			out[a.Name] = s
		}
	}
	return out
}

// sortedAttrs returns attributes in file order, so problems come out in
// a stable order.
func sortedAttrs(attrs hcl.Attributes) []*hcl.Attribute {
	out := make([]*hcl.Attribute, 0, len(attrs))
	for _, a := range attrs {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Range.Start.Byte < out[j].Range.Start.Byte
	})
	return out
}

// goValue turns an HCL value into what encoding/json would decode from
// the same JSON: strings, bools, numbers (int when whole, else float64),
// []interface{} and map[string]interface{}.
func goValue(v cty.Value) (interface{}, error) {
	if v.IsNull() {
		return nil, nil
	}
	if !v.IsKnown() {
		return nil, fmt.Errorf("want a literal value")
	}
	ty := v.Type()
	switch {
	case ty == cty.String:
		return v.AsString(), nil
	case ty == cty.Bool:
		return v.True(), nil
	case ty == cty.Number:
		f := v.AsBigFloat()
		if f.IsInt() {
			if i, acc := f.Int64(); acc == big.Exact && i >= math.MinInt && i <= math.MaxInt {
				return int(i), nil
			}
		}
		x, _ := f.Float64()
		if math.IsInf(x, 0) {
			return nil, fmt.Errorf("number %s is too large", f.Text('g', 10))
		}
		return x, nil
	case ty.IsListType(), ty.IsTupleType(), ty.IsSetType():
		out := make([]interface{}, 0, v.LengthInt())
		for it := v.ElementIterator(); it.Next(); {
			_, ev := it.Element()
			gv, err := goValue(ev)
			if err != nil {
				return nil, err
			}
			out = append(out, gv)
		}
		return out, nil
	case ty.IsMapType(), ty.IsObjectType():
		out := make(map[string]interface{}, v.LengthInt())
		for it := v.ElementIterator(); it.Next(); {
			k, ev := it.Element()
			gv, err := goValue(ev)
			if err != nil {
				return nil, err
			}
			out[k.AsString()] = gv
		}
		return out, nil
	}
	return nil, fmt.Errorf("want a string, number, bool, list or object")
}

// freeform reads a body of arbitrary arguments and blocks, as a task's
// config block is, into a map. Arguments become values; each nested
// block "name" { ... } appends a map to a list under "name", and each
// label adds one level of map: mount "x" { ... } becomes
// "mount": [{"x": [{...}]}], as Nomad's HCL decoding of config does.
func (d *decoder) freeform(body hcl.Body) map[string]interface{} {
	out := map[string]interface{}{}
	native, ok := body.(*hclsyntax.Body)
	if !ok {
		attrs, diags := body.JustAttributes()
		d.diags = append(d.diags, diags...)
		for _, a := range sortedAttrs(attrs) {
			d.freeformAttr(out, a.Name, a.Expr)
		}
		return out
	}
	attrs := make(hcl.Attributes, len(native.Attributes))
	for name, a := range native.Attributes {
		attrs[name] = a.AsHCLAttribute()
	}
	for _, a := range sortedAttrs(attrs) {
		d.freeformAttr(out, a.Name, a.Expr)
	}
	for _, b := range native.Blocks {
		if _, isAttr := native.Attributes[b.Type]; isAttr {
			d.errorf(b.TypeRange, "%s is both an argument and a block here: want one or the other", b.Type)
			continue
		}
		inner := d.freeform(b.Body)
		var item interface{} = inner
		for i := len(b.Labels) - 1; i >= 0; i-- {
			item = map[string]interface{}{b.Labels[i]: []interface{}{item}}
		}
		list, _ := out[b.Type].([]interface{})
		out[b.Type] = append(list, item)
	}
	return out
}

func (d *decoder) freeformAttr(out map[string]interface{}, name string, expr hcl.Expression) {
	v, ok := d.value(expr)
	if !ok {
		return
	}
	gv, err := goValue(v)
	if err != nil {
		d.errorf(expr.Range(), "invalid %s: %v", name, err)
		return
	}
	out[name] = gv
}
