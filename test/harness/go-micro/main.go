// A NATS micro service in Go, built with current nats.go from the Go module proxy (go.mod): its
// `$SRV.INFO` lists its endpoints, each with its subject. It serves MICRO_MOUNT.echo as service
// MICRO_MOUNT with dots as dashes, until interrupted. test/integration/go-micro.test.ts builds it:
//
//	GOFLAGS=-mod=mod go build -o go-micro ./test/harness/go-micro
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
	svc, err := micro.AddService(nc, micro.Config{
		Name:        strings.ReplaceAll(mount, ".", "-"),
		Version:     "1.0.0",
		Description: "a Go micro service",
	})
	if err == nil {
		err = svc.AddEndpoint("echo", micro.HandlerFunc(func(r micro.Request) { _ = r.Respond(r.Data()) }),
			micro.WithEndpointSubject(mount+".echo"))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "go micro ready")
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	<-stop
	_ = nc.Drain()
}
