"""The host seam: the one place that decides how the program's work reaches a host.

A host is either the machine running Pulumi (`address: local`) or a server reached over SSH.
Components never branch on which; they ask the seam:

- `host.py`: a `Host` and the one set of SSH options (host-key policy, key, timeouts) every
  path toward it uses;
- `ssh.py`: commands run here that reach the host (over ssh, the key on standard input), the
  accepted host key, and pulumi-command's SSH connection;
- `code.py`: which files of the project a host runs (the package `hostside/` and what it needs
  of `contracts/`), and their digest; HostCode (components/host_code.py) copies them there;
- `step.py`: `host_step`, one step of a host module (`python3 -m hostside MODULE VERB`) declared
  as a command resource, its inputs checked at declaration against the module's typed `Inputs`;
- `probe.py`: the read-only probes run at program time (every preview and up), before any code
  is on the host: a script of `hostside/probes/` with the files it includes inlined.
"""
