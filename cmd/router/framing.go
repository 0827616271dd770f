package main

import "net/http"

// connectionClose is the Connection header value that ends a client's
// connection after the response; shared, never appended to.
var connectionClose = []string{"close"}

// closeWhenChunked ends the connection after the response to a request
// that came with a Transfer-Encoding. RFC 9112 §6.1: a server that receives
// both Transfer-Encoding and Content-Length MUST close the connection after
// responding, as a Content-Length-trusting proxy in front may have read
// the bytes after the chunked body as part of it, or the other way round,
// and the two would split the stream into different requests. net/http
// deletes the Content-Length of a chunked request while parsing it, so no
// handler can tell the pair from a chunked request alone; closing after
// every request with a Transfer-Encoding covers the pair, and is allowed
// for any request (a server may always close). Clients of the inference
// routes send a Content-Length: the connection is closed only for the rare
// chunked upload.
func closeWhenChunked(w http.ResponseWriter, r *http.Request) {
	if len(r.TransferEncoding) > 0 {
		w.Header()["Connection"] = connectionClose
	}
}
