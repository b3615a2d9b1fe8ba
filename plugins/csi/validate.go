package csi

import (
	"errors"
	"strings"
)

// problems collects what is wrong with a request, so that Validate reports
// every missing field at once, on one line.
type problems []error

// add records msg when bad is true.
func (p *problems) add(bad bool, msg string) {
	if bad {
		*p = append(*p, errors.New(msg))
	}
}

// addErr records err when it is not nil.
func (p *problems) addErr(err error) {
	if err != nil {
		*p = append(*p, err)
	}
}

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return joined(p)
}

// joined is like errors.Join, but reads as one line.
type joined []error

func (j joined) Error() string {
	msgs := make([]string, len(j))
	for i, err := range j {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (j joined) Unwrap() []error { return j }

// request is what every request struct implements.
type request interface {
	Validate() error
	// subject names what the request acts on, for error messages.
	subject() subject
}

// validate checks req before it is sent; a nil req is invalid too.
func validate[R any, P interface {
	*R
	request
}](rpc string, req P) (subject, error) {
	if req == nil {
		return subject{}, invalid(rpc, subject{}, errors.New("missing request"))
	}
	s := req.subject()
	if err := req.Validate(); err != nil {
		return s, invalid(rpc, s, err)
	}
	return s, nil
}
