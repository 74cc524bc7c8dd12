// Package downstream lets promscaler serve beside other metrics servers
// (KEDA's metrics server, prometheus-adapter, a vendor's adapter): the
// configured downstreams' discovery documents are fetched on an interval
// and joined to promscaler's, and a request for a metric promscaler does
// not serve itself goes, after promscaler has authorized the caller, to the
// downstream that lists it, its answer passed on unchanged. Each downstream
// has its own guard (in-flight bound and breaker, promclient.Guard), so one
// that is down or slow answers 503 for its metrics only.
//
// The configuration file (LoadFile) is re-read at every refresh; its shape
// and the identity model are in docs/downstream.md.
package downstream
