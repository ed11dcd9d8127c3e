package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"shoal/internal/testbed"
)

const tbS3Usage = `up|down|env [--instance I]

  up     start the S3-compatible server (SeaweedFS, make s3-server) on this
         machine, outside every host, unless it runs; its S3 port listens on
         every address (0.0.0.0), so hosts reach it at their bridge's address;
         bucket "shoal" exists; writes its settings for this machine as AWS_*
         exports to /tmp/shoal-testbed-s3/env
  down   stop it and remove its data
  env    print the exports for the hosts of instance I (the endpoint at
         instance I's bridge address)`

func tbS3(c *tbCtx, args []string) int {
	action, rest := subcommandFirst(args)
	fs := c.flags()
	weed := fs.String("weed", testbed.WeedPath(), "the weed executable (make s3-server builds it)")
	if action == "" {
		rest = args
	}
	rest, code := c.parse(rest, tbS3Usage)
	if code >= 0 {
		return code
	}
	if len(rest) > 0 {
		fmt.Fprintf(c.stderr, "shoal testbed s3: unexpected argument %q\n", rest[0])
		return exitUsage
	}
	switch action {
	case "up":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		s, err := testbed.S3Up(ctx, *weed)
		if err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(c.stdout, "S3 server up: %s on this machine, %s from the hosts of instance %d; bucket %q.\n",
			s.Endpoint("127.0.0.1"), s.Endpoint(testbed.BridgeIP(c.instance)), c.instance, s.Bucket)
		fmt.Fprintf(c.stdout, "Its settings: '. %s' here, '%s' for a host's.\n",
			filepath.Join(testbed.TestbedS3Dir, "env"), tbHint(c.instance, "s3", "env"))
		return exitOK
	case "down":
		if err := testbed.S3Down(); err != nil {
			return c.fail(err)
		}
		return exitOK
	case "env":
		s, err := testbed.OpenS3()
		if errors.Is(err, testbed.ErrS3NotUp) {
			fmt.Fprintf(c.stderr, "shoal testbed s3 env: the S3 server is not up (run '%s')\n", tbHint(c.instance, "s3", "up"))
			return exitFailure
		}
		if err != nil {
			return c.fail(err)
		}
		fmt.Fprint(c.stdout, s.Env(testbed.BridgeIP(c.instance)))
		return exitOK
	case "":
		fmt.Fprintf(c.stderr, "shoal testbed s3: want up, down or env (see 'shoal testbed s3 --help')\n")
		return exitUsage
	}
	fmt.Fprintf(c.stderr, "shoal testbed s3: unknown action %q: want up, down or env\n", action)
	return exitUsage
}
