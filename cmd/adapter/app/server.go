package app

import (
	"fmt"
	"io"
)

// runServer runs the aggregated API server. Owned by the server work.
func runServer(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "adapter: server not implemented yet")
	return 2
}
