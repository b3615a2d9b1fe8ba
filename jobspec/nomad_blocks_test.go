package jobspec

import (
	"testing"

	"github.com/shoenig/test/must"
)

// Nomad jobspecs carry ephemeral_disk and logs blocks: logs sets the
// task's log rotation; ephemeral_disk's size is read (registration warns
// it is not reserved); what Berth cannot do is refused saying why.
func TestParse_NomadBlocks(t *testing.T) {
	job, err := Parse("j.hcl", []byte(`job "j" {
  group "g" {
    ephemeral_disk { size = 300 }
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
      logs {
        max_files     = 3
        max_file_size = 5
      }
    }
  }
}`))
	must.NoError(t, err)
	must.Eq(t, 300, *job.TaskGroups[0].EphemeralDisk.SizeMB)
	lc := job.TaskGroups[0].Tasks[0].LogConfig
	must.NotNil(t, lc)
	must.Eq(t, 3, *lc.MaxFiles)
	must.Eq(t, 5, *lc.MaxFileSizeMB)

	task := func(logs string) string {
		return "task \"t\" {\n driver = \"raw_exec\"\n logs {\n " + logs + "\n }\n}"
	}
	for block, want := range map[string]string{
		"ephemeral_disk {\n sticky = true\n}\n" + task("max_files = 2"):  "ephemeral_disk sticky = true is not supported: Berth does not carry",
		"ephemeral_disk {\n migrate = true\n}\n" + task("max_files = 2"): "keep data that must outlive an alloc in a CSI volume",
		task("disabled = true"):       "Berth always keeps a task's logs",
		task("max_files = 1"):         "max_files",
		task(`max_file_size = "big"`): "max_file_size",
	} {
		src := "job \"j\" {\n group \"g\" {\n" + block + "\n }\n}\n"
		_, err := Parse("j.hcl", []byte(src))
		must.ErrorContains(t, err, want, must.Sprint(src))
	}
}
