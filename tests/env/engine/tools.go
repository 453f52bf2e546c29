//go:build tools

// Package engine pins the CLI build.sh compiles; cmd/ holds the small tools built beside it.
package engine

import _ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
