package structs

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
)

// MaxNameLength caps IDs and names that become path elements.
const MaxNameLength = 128

// ValidatePathElement checks that name — a job ID, a group, task or
// volume name, a volume ID — is safe to use as one element of a file path
// and of a URL path: clients join task names into the alloc dir, and the
// HTTP API addresses jobs and volumes by ID. kind names the field in the
// error ("job ID", "task name").
func ValidatePathElement(kind, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("missing %s", kind)
	case len(name) > MaxNameLength:
		return fmt.Errorf("%s %q... is %d bytes, over the limit of %d", kind, name[:32], len(name), MaxNameLength)
	case name == "." || name == "..":
		return fmt.Errorf("%s %q is not allowed: it names a directory", kind, name)
	case strings.ContainsAny(name, `/\`):
		return fmt.Errorf("%s %q must not contain / or \\: it is used as a single path element", kind, name)
	}
	for _, r := range name {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return fmt.Errorf("%s %q must not contain control characters or invalid UTF-8", kind, name)
		}
	}
	return nil
}

// Known restart and reschedule settings.
var (
	restartModes   = []string{RestartPolicyModeFail, RestartPolicyModeDelay}
	delayFunctions = []string{"constant", "exponential", "fibonacci"}
)

// Validate checks a restart policy's numbers and mode.
func (p *RestartPolicy) Validate() error {
	var errs []error
	if p.Attempts < 0 {
		errs = append(errs, fmt.Errorf("attempts %d is negative", p.Attempts))
	}
	errs = append(errs, nonNegative("interval", p.Interval), nonNegative("delay", p.Delay))
	if !contains(restartModes, p.Mode) {
		errs = append(errs, fmt.Errorf("mode %q is not one of %s", p.Mode, strings.Join(restartModes, ", ")))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	return nil
}

// Validate checks a reschedule policy's numbers and delay function.
func (p *ReschedulePolicy) Validate() error {
	var errs []error
	if p.Attempts < 0 {
		errs = append(errs, fmt.Errorf("attempts %d is negative", p.Attempts))
	}
	errs = append(errs, nonNegative("interval", p.Interval), nonNegative("delay", p.Delay), nonNegative("max_delay", p.MaxDelay))
	if p.DelayFunction != "" && !contains(delayFunctions, p.DelayFunction) {
		errs = append(errs, fmt.Errorf("delay_function %q is not one of %s", p.DelayFunction, strings.Join(delayFunctions, ", ")))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("reschedule: %w", err)
	}
	return nil
}

// Validate compiles a regexp constraint's pattern, so a bad one is
// refused at submit rather than failing every placement.
func (c *Constraint) Validate() error {
	if c.Operand == "regexp" {
		if _, err := regexp.Compile(c.RTarget); err != nil {
			return fmt.Errorf("constraint %s regexp %q: %w", c.LTarget, c.RTarget, err)
		}
	}
	return nil
}

func validateConstraints(cs []*Constraint) []error {
	var errs []error
	for _, c := range cs {
		if c == nil {
			continue
		}
		if err := c.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Validate checks that resources are not negative.
func (r *Resources) Validate() error {
	var errs []error
	if r.CPU < 0 {
		errs = append(errs, fmt.Errorf("resources: cpu %d is negative", r.CPU))
	}
	if r.MemoryMB < 0 {
		errs = append(errs, fmt.Errorf("resources: memory %d is negative", r.MemoryMB))
	}
	return errors.Join(errs...)
}

func nonNegative(name string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%s %s is negative", name, d)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
