package taskrunner

import (
	"context"
	"maps"
	"strconv"
)

// envHook sets the NOMAD_* variables tasks ported from Nomad expect, then
// the task's own env over them. Paths are host paths, right for raw_exec;
// a driver that changes the task's root rewrites the *_DIR ones.
type envHook struct{}

func newEnvHook() *envHook { return &envHook{} }

func (*envHook) Name() string { return "env" }

func (*envHook) Prestart(_ context.Context, req *PrestartRequest, resp *PrestartResponse) error {
	a, t := req.Alloc, req.Task
	env := map[string]string{
		"NOMAD_ALLOC_DIR":   req.AllocDir.SharedDir,
		"NOMAD_TASK_DIR":    req.TaskDir.LocalDir,
		"NOMAD_SECRETS_DIR": req.TaskDir.SecretsDir,
		"NOMAD_ALLOC_ID":    a.ID,
		"NOMAD_ALLOC_NAME":  a.Name,
		"NOMAD_ALLOC_INDEX": strconv.Itoa(a.Index()),
		"NOMAD_GROUP_NAME":  a.TaskGroup,
		"NOMAD_TASK_NAME":   t.Name,
		"NOMAD_JOB_ID":      a.JobID,
		"NOMAD_NAMESPACE":   a.Namespace,
	}
	if a.Job != nil {
		env["NOMAD_JOB_NAME"] = a.Job.Name
	}
	if r := t.Resources; r != nil {
		env["NOMAD_CPU_LIMIT"] = strconv.FormatInt(r.CPU, 10)
		env["NOMAD_MEMORY_LIMIT"] = strconv.FormatInt(r.MemoryMB, 10)
	}
	maps.Copy(env, t.Env)
	resp.Env = env
	return nil
}
