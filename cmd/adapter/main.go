// Command adapter serves custom.metrics.k8s.io, external.metrics.k8s.io and
// metrics.k8s.io from Prometheus, configured by prometheus-adapter rules.
package main

import (
	"os"

	"github.com/promscaler/promscaler/cmd/adapter/app"
)

func main() {
	os.Exit(app.Main(os.Args[1:]))
}
