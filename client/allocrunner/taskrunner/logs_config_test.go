package taskrunner

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/client/logs"
	"github.com/berth-io/berth/nomad/structs"
)

// A task's logs block overrides the client's rotation, field by field.
func TestTaskLogs(t *testing.T) {
	client := logs.Config{MaxFiles: 10, MaxFileSize: 10 << 20}
	must.Eq(t, client, taskLogs(client, nil))
	must.Eq(t, logs.Config{MaxFiles: 3, MaxFileSize: 5 << 20}, taskLogs(client, &structs.LogConfig{MaxFiles: 3, MaxFileSizeMB: 5}))
	must.Eq(t, logs.Config{MaxFiles: 4, MaxFileSize: 10 << 20}, taskLogs(client, &structs.LogConfig{MaxFiles: 4}))
}
