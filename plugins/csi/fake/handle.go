package fake

import (
	"context"

	"google.golang.org/protobuf/proto"
)

// handle is the body of every RPC: record and script the call, then answer
// with the response set by SetResponse or the default def builds from the
// settings and the request.
func handle[Req, Resp proto.Message](ctx context.Context, p *Plugin, method string, req Req,
	def func(s Settings, req Req) Resp) (Resp, error) {

	p.observe(Call{Method: method, Req: req})
	if err := p.begin(ctx, method, req); err != nil {
		p.observe(Call{Method: method, Req: req, Done: true, Err: err})
		var zero Resp
		return zero, err
	}
	p.observe(Call{Method: method, Req: req, Done: true})
	return reply(p, method, def(p.settingsCopy(), req))
}
