package enginesim

import (
	"context"
	"net/http"
)

// sseDone is the terminal frame of chat and completions streams.
const sseDone = "data: [DONE]\n\n"

// Malformed frames emitted by Config.MalformedSSE: well-framed SSE whose data
// is not valid JSON.
const (
	malformedDataFrame  = "data: {\"enginesim\":\"malformed\"\n\n"
	malformedEventFrame = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"enginesim\":\"malformed\"\n\n"
)

// sseWriter batches SSE frames in buf and writes them with one Write and one
// Flush per flush call. After a write error it writes nothing more.
type sseWriter struct {
	w   http.ResponseWriter
	f   http.Flusher
	buf []byte
	err error
}

func (s *sseWriter) flush() error {
	if s.err != nil {
		return s.err
	}
	if len(s.buf) > 0 {
		_, s.err = s.w.Write(s.buf)
		s.buf = s.buf[:0]
	}
	if s.err == nil && s.f != nil {
		s.f.Flush()
	}
	return s.err
}

// event starts a Responses API event frame up to its sequence number; the
// caller appends the remaining fields and ends it with endEvent.
func (s *sseWriter) event(name string, seq *int) {
	s.buf = append(s.buf, "event: "...)
	s.buf = append(s.buf, name...)
	s.buf = append(s.buf, "\ndata: {\"type\":\""...)
	s.buf = append(s.buf, name...)
	s.buf = append(s.buf, `","sequence_number":`...)
	s.buf = appendInt(s.buf, int64(*seq))
	*seq++
}

func (s *sseWriter) endEvent() { s.buf = append(s.buf, "}\n\n"...) }

// itemRef appends the item, output and content indexes of the one message.
func (s *sseWriter) itemRef(g *generation) {
	s.buf = append(s.buf, `,"item_id":"`...)
	s.buf = appendMessageID(s.buf, g)
	s.buf = append(s.buf, `","output_index":0,"content_index":0`...)
}

// stream serves a streaming generation. Headers are sent at once (before
// the request is queued, as Starlette-based engines do); a Responses stream
// also sends response.created and response.in_progress then. Each token is
// flushed as it is generated. The SSE faults apply after token
// completion/2 (0-based): the malformed frame, then the truncation, then the
// request's FaultResetMidBody or FaultTruncateSSE; its FaultStall applies
// after the first token.
func (s *Server) stream(ctx context.Context, w http.ResponseWriter, ep Endpoint, g *generation, includeUsage bool, maxOutput int, bp *[]byte, ft faulted) {
	h := w.Header()
	h["Content-Type"] = sseContentType
	h["Cache-Control"] = noCache
	s.setMaxHeader(h)
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	sw := &sseWriter{w: w, f: f, buf: (*bp)[:0]}
	defer func() { *bp = sw.buf[:0] }()

	seqNo := 0
	if ep == EndpointResponses {
		for _, name := range [...]string{"response.created", "response.in_progress"} {
			sw.event(name, &seqNo)
			sw.buf = append(sw.buf, `,"response":`...)
			sw.buf = appendResponseObject(sw.buf, g, s.modelJSON, false, maxOutput)
			sw.endEvent()
		}
	}
	if sw.flush() != nil {
		return
	}

	seq, err := s.engine.admit(ctx, g.prompt)
	if err != nil {
		return
	}
	defer seq.release()
	fault := g.completion / 2
	for i := range g.completion {
		if i == 0 {
			err = seq.prefill(ctx, true)
		} else {
			err = seq.decode(ctx, 1)
		}
		if err != nil {
			return
		}
		s.appendTokenFrames(sw, ep, g, i, &seqNo)
		if sw.flush() != nil {
			return
		}
		if i == 0 && ft.fault == FaultStall {
			_ = s.engine.sleepUntilDone(ctx)
			return
		}
		if i == 0 && s.stallAt(StallAfterFirstChunk) {
			if s.stall(ctx) != nil {
				return
			}
		}
		if i == fault {
			s.injectSSEFaults(sw, ep)
			if ft.fault == FaultResetMidBody || ft.fault == FaultTruncateSSE {
				ft.rst.abortMidBody(w, ft.fault)
				return
			}
		}
	}
	seq.release()
	s.appendEndFrames(sw, ep, g, includeUsage, maxOutput, &seqNo)
	if sw.flush() == nil {
		s.logRequest(ctx, ep, http.StatusOK, g)
	}
}

// injectSSEFaults emits the malformed frame and aborts the stream, as
// configured.
func (s *Server) injectSSEFaults(sw *sseWriter, ep Endpoint) {
	if s.cfg.MalformedSSE {
		if ep == EndpointResponses {
			sw.buf = append(sw.buf, malformedEventFrame...)
		} else {
			sw.buf = append(sw.buf, malformedDataFrame...)
		}
		_ = sw.flush()
	}
	if s.cfg.TruncateSSE {
		// Deferred releases run while the panic unwinds; net/http then
		// closes the connection without ending the chunked body.
		panic(http.ErrAbortHandler)
	}
}

// appendTokenFrames appends the frames of token i: for the first token the
// opening frames (the chat role chunk; the Responses output item and content
// part), then the token's delta.
func (s *Server) appendTokenFrames(sw *sseWriter, ep Endpoint, g *generation, i int, seqNo *int) {
	switch ep {
	case EndpointChatCompletions:
		if i == 0 {
			sw.buf = append(sw.buf, "data: "...)
			sw.buf = appendChatChunk(sw.buf, g, s.modelJSON, chunkRole, 0)
			sw.buf = append(sw.buf, "\n\n"...)
		}
		sw.buf = append(sw.buf, "data: "...)
		sw.buf = appendChatChunk(sw.buf, g, s.modelJSON, chunkToken, i)
		sw.buf = append(sw.buf, "\n\n"...)
	case EndpointCompletions:
		sw.buf = append(sw.buf, "data: "...)
		sw.buf = appendCompletionChunk(sw.buf, g, s.modelJSON, chunkToken, i)
		sw.buf = append(sw.buf, "\n\n"...)
	default:
		if i == 0 {
			sw.event("response.output_item.added", seqNo)
			sw.buf = append(sw.buf, `,"output_index":0,"item":`...)
			sw.buf = appendMessageItem(sw.buf, g, false)
			sw.endEvent()
			sw.event("response.content_part.added", seqNo)
			sw.itemRef(g)
			sw.buf = append(sw.buf, `,"part":`...)
			sw.buf = appendOutputTextPart(sw.buf, g, false)
			sw.endEvent()
		}
		sw.event("response.output_text.delta", seqNo)
		sw.itemRef(g)
		sw.buf = append(sw.buf, `,"delta":"`...)
		sw.buf = appendToken(sw.buf, i)
		sw.buf = append(sw.buf, `","logprobs":[]`...)
		sw.endEvent()
	}
}

// appendEndFrames appends the closing frames: the finish chunk, the usage
// chunk when asked for and [DONE] for chat and completions; the done events
// and response.completed (with usage) for Responses.
func (s *Server) appendEndFrames(sw *sseWriter, ep Endpoint, g *generation, includeUsage bool, maxOutput int, seqNo *int) {
	if ep != EndpointResponses {
		chunk := appendChatChunk
		if ep == EndpointCompletions {
			chunk = appendCompletionChunk
		}
		sw.buf = append(sw.buf, "data: "...)
		sw.buf = chunk(sw.buf, g, s.modelJSON, chunkFinish, 0)
		sw.buf = append(sw.buf, "\n\n"...)
		if includeUsage {
			sw.buf = append(sw.buf, "data: "...)
			sw.buf = chunk(sw.buf, g, s.modelJSON, chunkUsage, 0)
			sw.buf = append(sw.buf, "\n\n"...)
		}
		sw.buf = append(sw.buf, sseDone...)
		return
	}
	sw.event("response.output_text.done", seqNo)
	sw.itemRef(g)
	sw.buf = append(sw.buf, `,"text":"`...)
	sw.buf = appendText(sw.buf, g.completion)
	sw.buf = append(sw.buf, `","logprobs":[]`...)
	sw.endEvent()
	sw.event("response.content_part.done", seqNo)
	sw.itemRef(g)
	sw.buf = append(sw.buf, `,"part":`...)
	sw.buf = appendOutputTextPart(sw.buf, g, true)
	sw.endEvent()
	sw.event("response.output_item.done", seqNo)
	sw.buf = append(sw.buf, `,"output_index":0,"item":`...)
	sw.buf = appendMessageItem(sw.buf, g, true)
	sw.endEvent()
	sw.event("response.completed", seqNo)
	sw.buf = append(sw.buf, `,"response":`...)
	sw.buf = appendResponseObject(sw.buf, g, s.modelJSON, true, maxOutput)
	sw.endEvent()
}
