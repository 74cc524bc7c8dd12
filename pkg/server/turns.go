package server

import (
	"net/http"

	"github.com/promscaler/promscaler/internal/turns"
)

// turnWriter ends the request's answer turn (internal/turns) at the
// answer's first write or status: from then on the request only sends
// bytes to its client, however slow the client is.
type turnWriter struct {
	http.ResponseWriter
	t *turns.Turn
}

// WriteHeader implements http.ResponseWriter.
func (w *turnWriter) WriteHeader(code int) {
	w.t.End()
	w.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (w *turnWriter) Write(b []byte) (int, error) {
	w.t.End()
	return w.ResponseWriter.Write(b)
}

// Unwrap implements responsewriter.UserProvidedDecorator.
func (w *turnWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
