// Command etcd is the upstream etcd server, built from the go.etcd.io/etcd
// module at the version pinned in this module's go.mod. The etcd module uses
// replace directives, so `go install go.etcd.io/etcd/server/v3@version`
// refuses it; this wrapper is the whole program.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
