// A NATS micro service in Go, as Debian's nats.go ships `micro` (its first shape: one endpoint,
// `$SRV.INFO` answers `subject`, no `endpoints`). It serves MICRO_MOUNT.echo as service
// MICRO_MOUNT with dots as dashes, until interrupted. test/integration/go-micro.test.ts builds it:
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o go-micro ./test/harness/go-micro
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

func main() {
	mount := os.Getenv("MICRO_MOUNT")
	// The credentials a test server demands (a NATS container does), as every test process gets them.
	var opts []nats.Option
	if user := os.Getenv("NATS_USER"); user != "" {
		opts = append(opts, nats.UserInfo(user, os.Getenv("NATS_PASSWORD")))
	}
	nc, err := nats.Connect(os.Getenv("NATS_URL"), opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_, err = micro.AddService(nc, micro.Config{
		Name:        strings.ReplaceAll(mount, ".", "-"),
		Version:     "1.0.0",
		Description: "a Go micro service",
		Endpoint: micro.Endpoint{
			Subject: mount + ".echo",
			Handler: func(r *micro.Request) { r.Respond(r.Data()) },
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "go micro ready")
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	<-stop
	nc.Drain()
}
