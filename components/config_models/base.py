"""What every section's model shares: the base model (unknown keys refused, frozen), the
namespace, the project directory, and the checks of addresses and paths several sections make."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict

NAMESPACE = "benchstack"
# The project's root (a relative path in the stack file is relative to it).
PROJECT_DIR = Path(__file__).resolve().parents[2]

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def ip_of(value: str | None) -> Address | None:
    """The IP address `value` is, or None for a host name (or `local`, or nothing)."""
    try:
        return ipaddress.ip_address(value or "")
    except ValueError:
        return None


def ip_literal(value: str) -> str:
    ipaddress.ip_address(value)
    return value


def host_ip(value: str) -> str:
    """A host's own address: a valid IP that names one machine (not 0.0.0.0 or ::)."""
    if ipaddress.ip_address(value).is_unspecified:
        raise ValueError(f"{value} names no host; give the address the other hosts reach it on")
    return value


def host_address(value: str) -> str:
    """An IP is checked as one; so is what can only be meant as one (digits and dots, or a
    colon: 10.0.0.300 and 10.0.0 are typos, not host names); anything else is a host name."""
    if ip_of(value) is not None or ":" in value or re.fullmatch(r"[0-9.]+", value):
        return host_ip(value)
    return value


def absolute_path(value: str) -> str:
    if not value.startswith("/"):
        raise ValueError(f"must be an absolute path on the host, got {value!r}")
    return value
