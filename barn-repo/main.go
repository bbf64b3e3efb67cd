// Command barn-repo: Publish image repositories and keep the verified image cache.
//
// main only wires the process into package cli; see cli.Main.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"barn.dev/barn-repo/cli"
	"barn.dev/lib/tool"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], tool.OSStdio(), os.Getenv)
	stop()
	os.Exit(code)
}
