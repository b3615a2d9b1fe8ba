package taskrunner

import (
	"testing"
	"testing/synctest"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/client/allocrunner/shared"
	"github.com/berth-io/berth/client/internal/testlog"
	"github.com/berth-io/berth/nomad/structs"
)

func TestInterpolate(t *testing.T) {
	node := &structs.Node{ID: "node-1", Name: "web-1", Datacenter: "dc2", NodeClass: "big",
		Attributes: map[string]string{"kernel.name": "linux"}, Meta: map[string]string{"rack": "r7"}}
	env := map[string]string{"NOMAD_ALLOC_INDEX": "3", "FOO": "bar"}
	cases := []struct{ in, want string }{
		{"-node-id=${node.unique.id}", "-node-id=node-1"},
		{"${node.unique.name}/${node.datacenter}/${node.class}", "web-1/dc2/big"},
		{"${attr.kernel.name}-${meta.rack}", "linux-r7"},
		{"db[${NOMAD_ALLOC_INDEX}]", "db[3]"},
		{"${env.FOO}", "bar"},
		{"no variables", "no variables"},
		{"unknown ${meta.nope} and ${HOME} stay", "unknown ${meta.nope} and ${HOME} stay"},
		{"unterminated ${node.unique.id", "unterminated ${node.unique.id"},
		{"${node.unique.id}${node.unique.id}", "node-1node-1"},
	}
	for _, tc := range cases {
		must.Eq(t, tc.want, interpolate(tc.in, env, node), must.Sprint(tc.in))
	}
	must.Eq(t, "${node.unique.id}", interpolate("${node.unique.id}", env, nil), must.Sprint("no node: as written"))
}

// TestRunner_InterpolatesConfigAndEnv: the driver gets the task's config
// and env with the node's and the task's runtime variables filled in.
func TestRunner_InterpolatesConfigAndEnv(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, structs.JobTypeService, nil, &structs.Task{Name: "t",
			Config: map[string]any{
				"args":   []any{"-node-id", "${node.unique.id}", "-index=${NOMAD_ALLOC_INDEX}"},
				"nested": map[string]any{"dc": "${node.datacenter}"},
			},
			Env: map[string]string{"RACK": "${meta.rack}"}})
		r, err := New(&Config{
			Alloc: h.alloc, Task: h.task(), Driver: h.host.Driver(), AllocDir: h.dir, DB: h.db,
			Logger: testlog.Logger(t), Resources: shared.NewHookResources(),
			Node: &structs.Node{ID: "node-1", Datacenter: "dc2", Meta: map[string]string{"rack": "r7"}},
		})
		must.NoError(t, err)
		go r.Run()
		synctest.Wait()

		cfg := h.host.Config(h.taskID())
		must.NotNil(t, cfg)
		must.Eq(t, []any{"-node-id", "node-1", "-index=0"}, cfg.Config["args"].([]any))
		must.Eq(t, map[string]any{"dc": "dc2"}, cfg.Config["nested"].(map[string]any))
		must.Eq(t, "r7", cfg.Env["RACK"])
		must.Eq(t, "${node.unique.id}", h.task().Config["args"].([]any)[1], must.Sprint("the job's own config was changed"))
		r.Kill(t.Context(), NewEvent(EventKilling, "test done"))
		<-r.WaitCh()
	})
}
