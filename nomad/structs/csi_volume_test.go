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
