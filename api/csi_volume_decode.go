package api

import (
	"encoding/json"
	"math/bits"
	"strconv"
	"strings"
)

// DecodeCSIVolumeRegisterRequest decodes the body of a volume register or
// create request (PUT /v1/volume/csi/:id, .../create) into out, exactly as
// encoding/json's Unmarshal would, result or error. The agent decodes
// request bodies with it; see decodeVolumes for why.
func DecodeCSIVolumeRegisterRequest(body []byte, out *CSIVolumeRegisterRequest) error {
	var fresh CSIVolumeRegisterRequest
	if decodeVolumes(body, &fresh.Volumes, nil, true) {
		*out = fresh
		return nil
	}
	return json.Unmarshal(body, out)
}

// volumesResponse is the answer of a volume register or create: it decodes
// itself (see decodeVolumes).
type volumesResponse struct{ out *CSIVolumeRegisterResponse }

func (r volumesResponse) decodeJSON(body []byte) error {
	var fresh CSIVolumeRegisterResponse
	if decodeVolumes(body, &fresh.Volumes, &fresh.Warnings, false) {
		*r.out = fresh
		return nil
	}
	return json.Unmarshal(body, r.out)
}

// decodeVolumes is the fast path of a body {"Volumes": [...]} (and
// "Warnings" when warnings is not nil): ok is false when the body must go
// to encoding/json. encoding/json spent ~8 ms of CPU on the 800 KB of a
// 1,000-volume register request, and as much again on its answer, mostly
// matching keys and allocating strings. As for the volume list
// (volumeStubList), the flat fields are read directly and their strings
// are slices of one copy of the body; the string maps and the
// capabilities are read directly too; other nested fields go to
// encoding/json unless empty. Anything it does not take as encoding/json
// would (a key matching a field only without case, a key given twice, a
// number that is not a plain integer, invalid JSON) sends the whole body
// to encoding/json, so the result, or the error, is always encoding/json's.
// With own, no string of the result shares the body's memory (see
// stubDecoder.own): a request body's volumes are kept by the servers.
func decodeVolumes(body []byte, vols *[]*CSIVolume, warnings *string, own bool) (ok bool) {
	return (&stubDecoder{b: body, s: string(body), own: own}).volumesBody(vols, warnings)
}

// volumesBody is decodeVolumes on the decoder of its body.
func (d *stubDecoder) volumesBody(vols *[]*CSIVolume, warnings *string) (ok bool) {
	d.ws()
	if !d.byte('{') {
		return false
	}
	seenVols, seenWarn := false, false
	d.ws()
	if !d.byte('}') {
		for {
			key, err := d.key()
			if err != nil {
				return false
			}
			switch {
			case key == "Volumes":
				if seenVols {
					return false
				}
				seenVols = true
				if !d.literal("null") && d.volumeList(vols) != nil {
					return false
				}
			case key == "Warnings" && warnings != nil:
				if seenWarn {
					return false
				}
				seenWarn = true
				if !d.literal("null") {
					if *warnings, err = d.str(); err != nil {
						return false
					}
				}
			case strings.EqualFold(key, "Volumes"), warnings != nil && strings.EqualFold(key, "Warnings"):
				return false
			default:
				if _, err := d.value(); err != nil {
					return false
				}
			}
			d.ws()
			if d.byte(',') {
				continue
			}
			if !d.byte('}') {
				return false
			}
			break
		}
	}
	d.ws()
	return d.i == len(d.b)
}

// volumeList reads [vol, ...] into a new slice.
func (d *stubDecoder) volumeList(vols *[]*CSIVolume) error {
	if !d.byte('[') {
		return errSlowPath
	}
	out := []*CSIVolume{}
	d.ws()
	if d.byte(']') {
		*vols = out
		return nil
	}
	for {
		d.ws()
		var v *CSIVolume
		if !d.literal("null") {
			v = new(CSIVolume)
			if err := d.volume(v); err != nil {
				return err
			}
		}
		out = append(out, v)
		d.ws()
		if d.byte(',') {
			continue
		}
		if !d.byte(']') {
			return errSlowPath
		}
		*vols = out
		return nil
	}
}

// volumeFields are the JSON names of CSIVolume's fields, in the order of
// the bits volume keeps of the ones it has read.
var volumeFields = []string{
	"ID", "Name", "ExternalID", "Namespace", "Topologies", "RequestedTopologies", "AccessMode",
	"AttachmentMode", "MountOptions", "Secrets", "Parameters", "Context", "Capacity",
	"RequestedCapacityMin", "RequestedCapacityMax", "RequestedCapabilities", "CloneID", "SnapshotID",
	"ReadAllocs", "WriteAllocs", "Allocations", "Created", "CurrentReaders", "CurrentWriters",
	"Schedulable", "PluginID", "Provider", "ProviderVersion", "ControllerRequired", "ControllersHealthy",
	"ControllersExpected", "NodesHealthy", "NodesExpected", "ResourceExhausted", "CreateIndex",
	"ModifyIndex", "CreateTime", "ModifyTime", "State", "Claims", "PastClaims", "Stats", "Expansion",
	"MutableParameters", "Modification",
}

// volumeFieldBit numbers volumeFields.
var volumeFieldBit = func() map[string]uint64 {
	m := make(map[string]uint64, len(volumeFields))
	for i, f := range volumeFields {
		m[f] = 1 << i
	}
	return m
}()

// volume reads one object into v, a new volume.
func (d *stubDecoder) volume(v *CSIVolume) error {
	if !d.byte('{') {
		return errSlowPath
	}
	d.ws()
	if d.byte('}') {
		return nil
	}
	var seen uint64
	next := 0 // the field expected next
	for {
		key, err := d.key()
		if err != nil {
			return err
		}
		// Keys come in volumeFields' order from encoding/json and from
		// CSIVolumeRegisterRequest.AppendJSON: one comparison with the
		// field expected next instead of a map lookup per key (~5% of
		// the CPU of decoding 1,000 volumes, BenchmarkDecodeVolumes1000).
		var (
			bit   uint64
			known bool
		)
		if next < len(volumeFields) && key == volumeFields[next] {
			bit, known = 1<<next, true
		} else {
			bit, known = volumeFieldBit[key]
		}
		if known {
			next = bits.TrailingZeros64(bit) + 1
			// encoding/json merges a repeated object or map into the
			// first; leave that to it.
			if seen&bit != 0 {
				return errSlowPath
			}
			seen |= bit
		}
		if err := d.volumeField(v, key, known); err != nil {
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

// volumeField reads the value of key into v. A null leaves the field as it
// is, as encoding/json does.
func (d *stubDecoder) volumeField(v *CSIVolume, key string, known bool) error {
	if !known {
		for _, f := range volumeFields {
			if strings.EqualFold(f, key) {
				return errSlowPath
			}
		}
		_, err := d.value() // a field the volume does not have
		return err
	}
	if d.literal("null") {
		return nil
	}
	var err error
	switch key {
	case "ID":
		v.ID, err = d.str()
	case "Name":
		v.Name, err = d.str()
	case "ExternalID":
		v.ExternalID, err = d.str()
	case "Namespace":
		v.Namespace, err = d.str()
	case "CloneID":
		v.CloneID, err = d.str()
	case "SnapshotID":
		v.SnapshotID, err = d.str()
	case "PluginID":
		v.PluginID, err = d.str()
	case "Provider":
		v.Provider, err = d.str()
	case "ProviderVersion":
		v.ProviderVersion, err = d.str()
	case "AccessMode":
		v.AccessMode, err = strAs[CSIVolumeAccessMode](d)
	case "AttachmentMode":
		v.AttachmentMode, err = strAs[CSIVolumeAttachmentMode](d)
	case "State":
		v.State, err = strAs[CSIVolumeState](d)
	case "Capacity":
		v.Capacity, err = d.int64()
	case "RequestedCapacityMin":
		v.RequestedCapacityMin, err = d.int64()
	case "RequestedCapacityMax":
		v.RequestedCapacityMax, err = d.int64()
	case "CreateTime":
		v.CreateTime, err = d.int64()
	case "ModifyTime":
		v.ModifyTime, err = d.int64()
	case "CurrentReaders":
		v.CurrentReaders, err = d.int()
	case "CurrentWriters":
		v.CurrentWriters, err = d.int()
	case "ControllersHealthy":
		v.ControllersHealthy, err = d.int()
	case "ControllersExpected":
		v.ControllersExpected, err = d.int()
	case "NodesHealthy":
		v.NodesHealthy, err = d.int()
	case "NodesExpected":
		v.NodesExpected, err = d.int()
	case "CreateIndex":
		v.CreateIndex, err = d.uint()
	case "ModifyIndex":
		v.ModifyIndex, err = d.uint()
	case "Created":
		v.Created, err = d.bool()
	case "Schedulable":
		v.Schedulable, err = d.bool()
	case "ControllerRequired":
		v.ControllerRequired, err = d.bool()
	case "Secrets":
		var m map[string]string
		m, err = d.stringMap()
		v.Secrets = m
	case "Parameters":
		v.Parameters, err = d.stringMap()
	case "Context":
		v.Context, err = d.stringMap()
	case "MutableParameters":
		v.MutableParameters, err = d.stringMap()
	case "RequestedCapabilities":
		v.RequestedCapabilities, err = d.capabilities()
	case "ReadAllocs":
		err = nestedOrEmpty(d, &v.ReadAllocs, '{', func() map[string]*Allocation { return map[string]*Allocation{} })
	case "WriteAllocs":
		err = nestedOrEmpty(d, &v.WriteAllocs, '{', func() map[string]*Allocation { return map[string]*Allocation{} })
	case "Allocations":
		err = nestedOrEmpty(d, &v.Allocations, '[', func() []*AllocationListStub { return []*AllocationListStub{} })
	case "Topologies":
		err = nestedOrEmpty(d, &v.Topologies, '[', func() []*CSITopology { return []*CSITopology{} })
	case "Claims":
		err = nestedOrEmpty(d, &v.Claims, '[', func() []*CSIVolumeClaim { return []*CSIVolumeClaim{} })
	case "PastClaims":
		err = nestedOrEmpty(d, &v.PastClaims, '[', func() []*CSIVolumeClaim { return []*CSIVolumeClaim{} })
	case "Stats":
		err = nestedOrEmpty(d, &v.Stats, '{', func() map[string]*CSIVolumeStats { return map[string]*CSIVolumeStats{} })
	case "RequestedTopologies":
		err = d.nested(&v.RequestedTopologies)
	case "MountOptions":
		v.MountOptions, err = d.mountOptions()
	case "ResourceExhausted":
		err = d.nested(&v.ResourceExhausted)
	case "Expansion":
		err = d.nested(&v.Expansion)
	case "Modification":
		err = d.nested(&v.Modification)
	default:
		return errSlowPath // a field of volumeFields without a case
	}
	return err
}

// nestedOrEmpty reads an empty object or array (open is its first byte)
// as empty() — what encoding/json makes of {} or [] in a nil map or
// slice — and anything else through encoding/json.
func nestedOrEmpty[T any](d *stubDecoder, out *T, open byte, empty func() T) error {
	close := byte(']')
	if open == '{' {
		close = '}'
	}
	start := d.i
	if d.byte(open) {
		d.ws()
		if d.byte(close) {
			*out = empty()
			return nil
		}
		d.i = start
	}
	return d.nested(out)
}

// stringMap reads an object of strings into a new map (a later key
// replaces an earlier one, as in encoding/json).
func (d *stubDecoder) stringMap() (map[string]string, error) {
	if !d.byte('{') {
		return nil, errSlowPath
	}
	m := map[string]string{}
	d.ws()
	if d.byte('}') {
		return m, nil
	}
	for {
		d.ws()
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		d.ws()
		if !d.byte(':') {
			return nil, errSlowPath
		}
		d.ws()
		// encoding/json stores "" for a null value; rare enough to leave
		// to it.
		v, err := d.str()
		if err != nil {
			return nil, err
		}
		m[k] = v
		if more, err := d.more('}'); err != nil {
			return nil, err
		} else if more {
			continue
		}
		return m, nil
	}
}

// capabilities reads [{"AccessMode": ..., "AttachmentMode": ...}, ...].
func (d *stubDecoder) capabilities() ([]*CSIVolumeCapability, error) {
	if !d.byte('[') {
		return nil, errSlowPath
	}
	out := []*CSIVolumeCapability{}
	d.ws()
	if d.byte(']') {
		return out, nil
	}
	for {
		d.ws()
		var c *CSIVolumeCapability
		if !d.literal("null") {
			c = new(CSIVolumeCapability)
			if err := d.capability(c); err != nil {
				return nil, err
			}
		}
		out = append(out, c)
		if more, err := d.more(']'); err != nil {
			return nil, err
		} else if more {
			continue
		}
		return out, nil
	}
}

func (d *stubDecoder) capability(c *CSIVolumeCapability) error {
	if !d.byte('{') {
		return errSlowPath
	}
	d.ws()
	if d.byte('}') {
		return nil
	}
	var seenAccess, seenAttach bool
	for {
		key, err := d.key()
		if err != nil {
			return err
		}
		switch {
		case d.literal("null"):
			// leaves the field as it is
			if key != "AccessMode" && key != "AttachmentMode" && (strings.EqualFold(key, "AccessMode") || strings.EqualFold(key, "AttachmentMode")) {
				return errSlowPath
			}
		case key == "AccessMode" && !seenAccess:
			seenAccess = true
			c.AccessMode, err = strAs[CSIVolumeAccessMode](d)
		case key == "AttachmentMode" && !seenAttach:
			seenAttach = true
			c.AttachmentMode, err = strAs[CSIVolumeAttachmentMode](d)
		case strings.EqualFold(key, "AccessMode"), strings.EqualFold(key, "AttachmentMode"):
			return errSlowPath
		default:
			_, err = d.value()
		}
		if err != nil {
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

// mountOptions reads {"FSType": ..., "MountFlags": [...]} into a new
// CSIMountOptions (every volume of a register request may have one; it
// was a fifth of the decoder's time through encoding/json).
func (d *stubDecoder) mountOptions() (*CSIMountOptions, error) {
	if !d.byte('{') {
		return nil, errSlowPath
	}
	o := new(CSIMountOptions)
	d.ws()
	if d.byte('}') {
		return o, nil
	}
	var seenFS, seenFlags bool
	for {
		key, err := d.key()
		if err != nil {
			return nil, err
		}
		switch {
		case key == "FSType" && !seenFS:
			seenFS = true
			if !d.literal("null") {
				o.FSType, err = d.str()
			}
		case key == "MountFlags" && !seenFlags:
			seenFlags = true
			if !d.literal("null") {
				o.MountFlags, err = d.strings()
			}
		case strings.EqualFold(key, "FSType"), strings.EqualFold(key, "MountFlags"):
			return nil, errSlowPath // a repeated or differently cased key
		default:
			_, err = d.value()
		}
		if err != nil {
			return nil, err
		}
		if more, err := d.more('}'); err != nil {
			return nil, err
		} else if more {
			continue
		}
		return o, nil
	}
}

// strings reads an array of strings into a new slice; a null element
// goes to encoding/json.
func (d *stubDecoder) strings() ([]string, error) {
	if !d.byte('[') {
		return nil, errSlowPath
	}
	out := []string{}
	d.ws()
	if d.byte(']') {
		return out, nil
	}
	for {
		d.ws()
		s, err := d.str()
		if err != nil {
			return nil, err
		}
		out = append(out, s)
		if more, err := d.more(']'); err != nil {
			return nil, err
		} else if more {
			continue
		}
		return out, nil
	}
}

func (d *stubDecoder) int64() (int64, error) {
	b, err := d.number()
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(b, 10, 64)
	if err != nil {
		return 0, errSlowPath
	}
	return v, nil
}
