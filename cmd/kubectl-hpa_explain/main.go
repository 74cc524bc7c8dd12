// Command kubectl-hpa_explain is "autoscaler explain" as a kubectl plugin:
// with this binary on $PATH, "kubectl hpa-explain [NAMESPACE/]HPA" explains
// the decision the HPA controller would take now (docs/explain.md).
package main

import (
	"os"

	"github.com/promscaler/promscaler/cmd/autoscaler/app"
)

func main() {
	os.Exit(app.MainExplain(os.Args[1:]))
}
