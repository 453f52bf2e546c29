//go:build tools

// Package engine only pins what build.sh compiles; it has no code of its own.
package engine

import _ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
