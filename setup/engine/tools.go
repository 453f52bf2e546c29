//go:build tools

// Package engine pins what build.sh compiles from this module: the Pulumi CLI, and the Python
// language host, whose main.go (upstream's, from ../shared/vendor) is copied in at build time.
// The imports below are that main.go's direct dependencies, so `go mod tidy` keeps them.
package engine

import (
	_ "github.com/blang/semver"
	_ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
	_ "github.com/pulumi/pulumi/pkg/v3/codegen/python"
	_ "github.com/pulumi/pulumi/sdk/v3/go/common/tail"
	_ "github.com/pulumi/pulumi/sdk/v3/python/toolchain"
	_ "go.opentelemetry.io/otel"
	_ "go.opentelemetry.io/otel/trace"
	_ "google.golang.org/grpc"
	_ "google.golang.org/protobuf/types/known/structpb"
)
