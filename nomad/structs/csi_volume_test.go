package structs

import (
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

// A volume's errors come in the same order every time: the operator
// fixing one request sees the same message twice, and tests can match it.
func TestCSIVolumeValidate_ErrorsInAFixedOrder(t *testing.T) {
	big := map[string]string{"k": strings.Repeat("x", MaxMapBytes)}
	v := &CSIVolume{ID: "v", Namespace: DefaultNamespace, PluginID: "p", Parameters: big, Context: big, Secrets: big,
		RequestedCapabilities: []*CSIVolumeCapability{{AccessMode: CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: CSIVolumeAttachmentModeFilesystem}}}
	first := v.Validate()
	must.Error(t, first)
	msg := first.Error()
	p, c, s := strings.Index(msg, "parameters are"), strings.Index(msg, "context are"), strings.Index(msg, "secrets are")
	must.True(t, 0 <= p && p < c && c < s, must.Sprint(msg))
	for range 50 {
		must.Eq(t, msg, v.Validate().Error())
	}
}

func TestCSIVolume_RedactedHidesWithoutChangingTheVolume(t *testing.T) {
	v := &CSIVolume{
		ID: "v", Secrets: CSISecrets{"password": "hunter2"},
		MountOptions: &CSIMountOptions{FSType: "ext4", MountFlags: []string{"noatime"}},
		Parameters:   map[string]string{"tier": "gold"},
	}
	r := v.Redacted()
	must.Nil(t, r.Secrets)
	must.Eq(t, &CSIMountOptions{FSType: "ext4", MountFlags: []string{"[REDACTED]"}}, r.MountOptions)
	must.Eq(t, "gold", r.Parameters["tier"])
	// The volume itself (a stored object) keeps both.
	must.Eq(t, "hunter2", v.Secrets["password"])
	must.Eq(t, []string{"noatime"}, v.MountOptions.MountFlags)

	// With nothing to hide it is the volume itself, not a copy.
	plain := &CSIVolume{ID: "p", MountOptions: &CSIMountOptions{FSType: "ext4"}}
	must.True(t, plain.Redacted() == plain)
	only := &CSIVolume{ID: "s", Secrets: CSISecrets{"k": "v"}}
	must.Nil(t, only.Redacted().Secrets)
	must.Eq(t, "v", only.Secrets["k"])
}
