// Command gencerts writes a throwaway CA and a serving certificate for the
// adapter's Service (ca.crt, tls.crt, tls.key), e.g. for the tls-secret
// overlay in deploy/overlays/tls-secret/certs.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/promscaler/promscaler/test/e2e/framework"
)

func main() {
	out := flag.String("out", "deploy/overlays/tls-secret/certs", "directory to write ca.crt, tls.crt and tls.key into")
	names := flag.String("dns-names", "promscaler-adapter.promscaler.svc,promscaler-adapter.promscaler.svc.cluster.local", "comma-separated DNS names of the serving certificate")
	flag.Parse()
	if err := framework.WriteServingSet(*out, strings.Split(*names, ",")...); err != nil {
		fmt.Fprintln(os.Stderr, "gencerts:", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s/{ca.crt,tls.crt,tls.key}\n", *out)
}
