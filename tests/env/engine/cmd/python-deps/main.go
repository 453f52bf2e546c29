// Command python-deps does what the Python language host does for `pulumi install` and the
// first `pulumi up` of a fresh clone, with the same code (the SDK's python/toolchain): read the
// project's runtime options from Pulumi.yaml, resolve the toolchain, create the virtualenv and
// install the dependencies. The language host itself cannot be built here (its module is not
// served), so the real-CLI tests run this to prove a fresh clone gets its environment.
//
// Usage: python-deps PROJECT_DIR
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"
	"github.com/pulumi/pulumi/sdk/v3/python/toolchain"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: python-deps PROJECT_DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "python-deps: %v\n", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	root, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	project, err := workspace.LoadProject(filepath.Join(root, "Pulumi.yaml"))
	if err != nil {
		return err
	}
	options := project.Runtime.Options()
	opts := toolchain.PythonOptions{Root: root, ProgramDir: root}
	if v, ok := options["virtualenv"].(string); ok {
		opts.Virtualenv = v
	}
	switch options["toolchain"] {
	case "pip":
		opts.Toolchain = toolchain.Pip
	case "uv":
		opts.Toolchain = toolchain.Uv
	case "poetry":
		opts.Toolchain = toolchain.Poetry
	case nil:
		opts.Toolchain = toolchain.Auto
	default:
		return fmt.Errorf("unknown toolchain %v in %s/Pulumi.yaml", options["toolchain"], root)
	}
	tc, err := toolchain.ResolveToolchain(opts)
	if err != nil {
		return err
	}
	return tc.InstallDependencies(context.Background(), root, false, true, os.Stdout, os.Stderr)
}
