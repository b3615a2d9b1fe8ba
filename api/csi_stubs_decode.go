package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// volumeStubList is the answer of GET /v1/volumes?type=csi. It decodes
// itself: encoding/json spent about 5 µs per stub on reflection (5 ms of
// the 7 ms a list of 1,000 volumes took through this package). The
// decoder below reads the stub's flat fields directly and hands the nested
// ones (Topologies, ResourceExhausted) to encoding/json. Anything it does
// not take as encoding/json would (a key matching a field only without
// case, a number that is not a plain integer, invalid JSON) sends the
// whole body to encoding/json instead, so the result, or the error, is
// always encoding/json's.
//
// Every plain string of the answer (keys included) is a slice of the
// body, which becomes the strings' memory: no allocation for a key or a
// value, which were most of the decoder's time (allocation and the GC it
// drives). The price is that a stub kept alone keeps the whole body
// alive.
type volumeStubList []*CSIVolumeListStub

func (l *volumeStubList) decodeJSON(body []byte) error {
	if out, ok := decodeVolumeStubs(body); ok {
		*l = out
		return nil
	}
	var out []*CSIVolumeListStub
	if err := json.Unmarshal(body, &out); err != nil {
		return err
	}
	*l = out
	return nil
}

// errSlowPath ends the fast decoder: encoding/json decodes the body.
var errSlowPath = errors.New("not for the fast path")

// decodeVolumeStubs is the fast path; ok is false when the body must go
// to encoding/json.
func decodeVolumeStubs(body []byte) (out []*CSIVolumeListStub, ok bool) {
	// The strings alias body itself, without a copy (~450 KB on a list
	// of 1,000 volumes, its allocation and the GC it drives): body is
	// the decoder's (rawDecoder) and nothing writes it afterwards, as
	// strings.Builder does with its buffer.
	d := stubDecoder{b: body, s: unsafe.String(unsafe.SliceData(body), len(body))}
	d.ws()
	if d.literal("null") {
		d.ws()
		return nil, d.i == len(d.b)
	}
	if !d.byte('[') {
		return nil, false
	}
	// The agent writes ~450 bytes a stub: sizing the slice from the body
	// saves its growth, and the stubs are allocated in blocks (a stub
	// kept alone keeps its block alive, as it keeps the body).
	out = make([]*CSIVolumeListStub, 0, len(body)/stubJSONSizeMin+1)
	d.ws()
	if d.byte(']') {
		d.ws()
		return out, d.i == len(d.b)
	}
	var block []CSIVolumeListStub
	for {
		d.ws()
		var s *CSIVolumeListStub
		if !d.literal("null") {
			if len(block) == 0 {
				block = make([]CSIVolumeListStub, min(stubBlock, (len(d.b)-d.i)/stubJSONSizeMin+1))
			}
			s, block = &block[0], block[1:]
			if d.stub(s) != nil {
				return nil, false
			}
		}
		out = append(out, s)
		d.ws()
		if d.byte(',') {
			continue
		}
		if !d.byte(']') {
			return nil, false
		}
		d.ws()
		return out, d.i == len(d.b)
	}
}

const (
	// stubJSONSizeMin is fewer bytes than the agent writes for a stub
	// (~450 with every field): the estimates of the stub count it gives
	// are high, rarely low.
	stubJSONSizeMin = 300
	// stubBlock is the most stubs allocated at once.
	stubBlock = 256
)

// stubDecoder reads JSON from b at i; s is b as a string, which the plain
// strings decoded are slices of.
type stubDecoder struct {
	b []byte
	s string
	i int
	// own makes every string value a copy instead of a slice of s: for
	// a result that outlives the body (the agent's servers store the
	// volumes of a register request as they were decoded, and a slice
	// would keep the whole body alive, ~800 bytes per volume). Keys
	// are never copied: they are matched, not kept.
	own bool
}

func (d *stubDecoder) ws() {
	b, i := d.b, d.i
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
			continue
		}
		break
	}
	d.i = i
}

// byte consumes c if it is next.
func (d *stubDecoder) byte(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// literal consumes lit (null, true, false) if it is next and ends there.
func (d *stubDecoder) literal(lit string) bool {
	// The first byte alone answers most calls (a field's null check).
	if d.i >= len(d.b) || d.b[d.i] != lit[0] || !bytes.HasPrefix(d.b[d.i:], []byte(lit)) {
		return false
	}
	if j := d.i + len(lit); j < len(d.b) && isIdentByte(d.b[j]) {
		return false
	}
	d.i += len(lit)
	return true
}

func isIdentByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// stub reads one object into s.
func (d *stubDecoder) stub(s *CSIVolumeListStub) error {
	if !d.byte('{') {
		return errSlowPath
	}
	d.ws()
	if d.byte('}') {
		return nil
	}
	next := 0 // the index in stubFields of the key the agent writes next
	for {
		var key string
		if next < len(stubKeys) && strings.HasPrefix(d.s[d.i:], stubKeys[next]) {
			// The agent's order: the key is known without reading it.
			key = stubFields[next]
			d.i += len(stubKeys[next])
			d.ws()
			next++
		} else {
			var err error
			if key, err = d.key(); err != nil {
				return err
			}
			next = len(stubKeys) // out of order: read every key from here
		}
		if err := d.field(s, key); err != nil {
			return err
		}
		if more, err := d.more('}'); err != nil {
			return err
		} else if more {
			continue
		}
		return nil
	}
}

// stubFields are the JSON names of CSIVolumeListStub's fields, in the
// order the agent writes them: a key that equals one of them only
// without case is left to encoding/json.
var stubFields = []string{
	"ID", "Namespace", "Name", "ExternalID", "Topologies", "AccessMode", "AttachmentMode",
	"CurrentReaders", "CurrentWriters", "Schedulable", "PluginID", "Provider", "ControllerRequired",
	"ControllersHealthy", "ControllersExpected", "NodesHealthy", "NodesExpected", "ResourceExhausted",
	"CreateIndex", "ModifyIndex", "State", "Claims",
}

// stubKeys are stubFields as the agent writes them, quoted with their
// colon, in its order: a stub's keys are checked against them in turn
// before they are read (a key read and matched was a third of the
// decoder's time).
var stubKeys = func() []string {
	out := make([]string, len(stubFields))
	for i, f := range stubFields {
		out[i] = `"` + f + `":`
	}
	return out
}()

// field reads the value of key into s. A null leaves the field as it is,
// as encoding/json does.
func (d *stubDecoder) field(s *CSIVolumeListStub, key string) error {
	if d.literal("null") {
		return nil
	}
	var err error
	switch key {
	case "ID":
		s.ID, err = d.str()
	case "Namespace":
		s.Namespace, err = d.str()
	case "Name":
		s.Name, err = d.str()
	case "ExternalID":
		s.ExternalID, err = d.str()
	case "PluginID":
		s.PluginID, err = d.str()
	case "Provider":
		s.Provider, err = d.str()
	case "AccessMode":
		s.AccessMode, err = strAs[CSIVolumeAccessMode](d)
	case "AttachmentMode":
		s.AttachmentMode, err = strAs[CSIVolumeAttachmentMode](d)
	case "State":
		s.State, err = strAs[CSIVolumeState](d)
	case "CurrentReaders":
		s.CurrentReaders, err = d.int()
	case "CurrentWriters":
		s.CurrentWriters, err = d.int()
	case "ControllersHealthy":
		s.ControllersHealthy, err = d.int()
	case "ControllersExpected":
		s.ControllersExpected, err = d.int()
	case "NodesHealthy":
		s.NodesHealthy, err = d.int()
	case "NodesExpected":
		s.NodesExpected, err = d.int()
	case "Claims":
		s.Claims, err = d.int()
	case "CreateIndex":
		s.CreateIndex, err = d.uint()
	case "ModifyIndex":
		s.ModifyIndex, err = d.uint()
	case "Schedulable":
		s.Schedulable, err = d.bool()
	case "ControllerRequired":
		s.ControllerRequired, err = d.bool()
	case "Topologies":
		err = d.nested(&s.Topologies)
	case "ResourceExhausted":
		err = d.nested(&s.ResourceExhausted)
	default:
		for _, f := range stubFields {
			if strings.EqualFold(f, key) {
				return errSlowPath
			}
		}
		_, err = d.value() // a field the stub does not have
	}
	return err
}

// key reads an object's key and its colon, with the white space around
// them, leaving d at the value.
func (d *stubDecoder) key() (string, error) {
	d.ws()
	k, err := d.rawStr()
	if err != nil {
		return "", err
	}
	d.ws()
	if !d.byte(':') {
		return "", errSlowPath
	}
	d.ws()
	return k, nil
}

// more reads what follows a member of an object or array (close is '}'
// or ']'): true after a comma, false at the end; anything else goes to
// encoding/json.
func (d *stubDecoder) more(close byte) (bool, error) {
	d.ws()
	if d.byte(',') {
		return true, nil
	}
	if d.byte(close) {
		return false, nil
	}
	return false, errSlowPath
}

// strAs reads a string into a string type (an access mode, a state).
func strAs[T ~string](d *stubDecoder) (T, error) {
	s, err := d.str()
	return T(s), err
}

// str reads a string value: rawStr's, copied when the decoder owns its
// strings.
func (d *stubDecoder) str() (string, error) {
	s, err := d.rawStr()
	if d.own && err == nil {
		s = strings.Clone(s)
	}
	return s, err
}

// rawStr reads a string. One without escapes, control characters or
// invalid UTF-8 is taken as it is (a slice of the body); others are
// unquoted by encoding/json.
func (d *stubDecoder) rawStr() (string, error) {
	if !d.byte('"') {
		return "", errSlowPath
	}
	start, plain, ascii := d.i, true, true
	for d.i < len(d.b) {
		// Skip the plain ASCII run at once: most strings are one. The
		// loop runs on locals: through d, every step stored d.i.
		b, i := d.b, d.i
		for i < len(b) && !strSpecial[b[i]] {
			i++
		}
		d.i = i
		if d.i == len(d.b) {
			break
		}
		c := d.b[d.i]
		switch {
		case c == '"':
			raw := d.s[start:d.i]
			d.i++
			if plain && (ascii || utf8.ValidString(raw)) {
				return raw, nil
			}
			var s string
			if err := json.Unmarshal(d.b[start-1:d.i], &s); err != nil {
				return "", errSlowPath
			}
			return s, nil
		case c == '\\':
			plain = false
			d.i += 2
			continue
		case c < 0x20:
			return "", errSlowPath
		default: // not ASCII
			ascii = false
		}
		d.i++
	}
	return "", errSlowPath
}

// strSpecial marks the bytes that end a plain ASCII run in a string: the
// quote, the backslash, control characters and every non-ASCII byte.
var strSpecial = func() (t [256]bool) {
	for c := range t {
		t[c] = c == '"' || c == '\\' || c < 0x20 || c >= utf8.RuneSelf
	}
	return t
}()

// number returns the bytes of an integer: an optional minus, then 0 or a
// digit string without leading zeros. Fractions and exponents go to the
// slow path (encoding/json refuses them for integers, with its error).
func (d *stubDecoder) number() (string, error) {
	start := d.i
	d.byte('-')
	digits := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	n := d.i - digits
	if n == 0 || (n > 1 && d.b[digits] == '0') {
		return "", errSlowPath
	}
	if d.i < len(d.b) {
		switch d.b[d.i] {
		case '.', 'e', 'E':
			return "", errSlowPath
		}
	}
	return d.s[start:d.i], nil
}

// smallUint reads a plain non-negative integer of at most 18 digits (no
// overflow possible) as it scans it: every number of a stub is one, and
// strconv on the scanned bytes was a tenth of the decoder's time. Any
// other number leaves d as it was (ok false) for number and strconv.
func (d *stubDecoder) smallUint() (v uint64, ok bool) {
	b, i := d.b, d.i
	j := i
	for j < len(b) && j-i < 19 && b[j]-'0' <= 9 {
		v = v*10 + uint64(b[j]-'0')
		j++
	}
	if n := j - i; n == 0 || n > 18 || (n > 1 && b[i] == '0') {
		return 0, false
	}
	if j < len(b) {
		switch b[j] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	d.i = j
	return v, true
}

func (d *stubDecoder) int() (int, error) {
	if v, ok := d.smallUint(); ok && v <= math.MaxInt {
		return int(v), nil
	}
	b, err := d.number()
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(b, 10, strconv.IntSize)
	if err != nil {
		return 0, errSlowPath
	}
	return int(v), nil
}

func (d *stubDecoder) uint() (uint64, error) {
	if v, ok := d.smallUint(); ok {
		return v, nil
	}
	b, err := d.number()
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(b, 10, 64)
	if err != nil {
		return 0, errSlowPath
	}
	return v, nil
}

func (d *stubDecoder) bool() (bool, error) {
	switch {
	case d.literal("true"):
		return true, nil
	case d.literal("false"):
		return false, nil
	}
	return false, errSlowPath
}

// nested hands one value to encoding/json.
func (d *stubDecoder) nested(out any) error {
	raw, err := d.value()
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return errSlowPath
	}
	return nil
}

// value returns the bytes of the next value (with any whitespace after
// it), checked to be valid JSON: it runs to the comma or bracket of the
// enclosing object at depth 0, skipping strings whole.
func (d *stubDecoder) value() ([]byte, error) {
	start, depth := d.i, 0
scan:
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case '"':
			for d.i++; d.i < len(d.b) && d.b[d.i] != '"'; d.i++ {
				if d.b[d.i] == '\\' {
					d.i++
				}
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				break scan
			}
			depth--
		case ',':
			if depth == 0 {
				break scan
			}
		}
		d.i++
	}
	if d.i > len(d.b) || depth != 0 {
		return nil, errSlowPath
	}
	raw := d.b[start:d.i]
	if !json.Valid(raw) {
		return nil, errSlowPath
	}
	return raw, nil
}
