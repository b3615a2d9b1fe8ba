package procdriver

import "github.com/berth-io/berth/plugins/drivers"

// Command reads the driver config both raw_exec and exec take: `command`
// (a string, required) and `args` (strings), rejecting any other key.
func Command(cfg *drivers.TaskConfig, driver string) (string, []string, error) {
	if err := drivers.CheckConfigKeys(cfg, driver, "command", "args"); err != nil {
		return "", nil, err
	}
	command, err := drivers.ConfigString(cfg, "command", true)
	if err != nil {
		return "", nil, err
	}
	args, err := drivers.ConfigStrings(cfg, "args")
	if err != nil {
		return "", nil, err
	}
	return command, args, nil
}
