// Command autoscaler runs promscaler's HorizontalPodAutoscaler controller and
// its simulator.
package main

import (
	"os"

	"github.com/promscaler/promscaler/cmd/autoscaler/app"
)

func main() {
	os.Exit(app.Main(os.Args[1:]))
}
