package fake

import (
	"context"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// handle is the body of every RPC: record and script the call, then answer
// with the response set by SetResponse or the default def builds from the
// settings and the request.
func handle[Req, Resp proto.Message](ctx context.Context, p *Plugin, method string, req Req,
	def func(s Settings, req Req) Resp) (Resp, error) {

	p.observe(Call{Method: method, Req: req})
	outlives, err := p.begin(ctx, method, req)
	if err == nil && !outlives && ctx.Err() != nil {
		// A plugin that honours its call's deadline does not act once it
		// has passed (what the servers' PublishUntil and UnpublishUntil
		// assume, DESIGN §5). Checked where the call takes effect: a
		// starved process can reach this line long after the caller
		// checked the deadline (seed 24875). SetSlow is the plugin that
		// does not watch its context.
		err = status.FromContextError(ctx.Err()).Err()
	}
	if err != nil {
		p.observe(Call{Method: method, Req: req, Done: true, Err: err})
		var zero Resp
		return zero, err
	}
	p.observe(Call{Method: method, Req: req, Done: true})
	return reply(p, method, def(p.settingsCopy(), req))
}
