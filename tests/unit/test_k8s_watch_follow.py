"""The watcher's follow loop (hostside/k8s_watch.py, Resource.follow) against a scripted API: it
lists, watches from the list's resourceVersion, lists again when the version is gone (410, as a
watch ERROR or as the API's answer), waits a doubling backoff after a failure and resets it on
a delivery, and ends at the stop. The real cluster's watch is tests/k8s/test_hostside_k8s.py's."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from hostside import k8s_watch
from hostside.k8s_kubeconfig import ApiError


def pod(rv: str) -> dict:
    return {"kind": "Pod", "apiVersion": "v1", "metadata": {"uid": "u1", "resourceVersion": rv}}


class Stop(threading.Event):
    """A stop event whose waits return at once and are recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout or 0.0)
        return self.is_set()


class Api:
    """Each list answers the next version; each watch plays the next script (a list of
    deliveries, or an exception); when the scripts run out, the stop is set."""

    def __init__(self, stop: Stop, scripts: list) -> None:
        self.stop, self.scripts = stop, scripts
        self.lists = iter(["5", "7", "9"])
        self.watched: list[str] = []

    def get(self, path: str) -> dict:
        return {"items": [], "metadata": {"resourceVersion": next(self.lists)}}

    def stream(self, path: str, timeout: float) -> Iterator[dict]:
        self.watched.append(path.split("resourceVersion=")[1])
        if not self.scripts:
            # Stopped while a watch runs: the next delivery is not handled.
            self.stop.set()
            yield {"type": "BOOKMARK", "object": {}}
            return
        script = self.scripts.pop(0)
        if isinstance(script, Exception):
            raise script
        yield from script


class Recorded:
    def __init__(self) -> None:
        self.pods: list[tuple[str, str]] = []

    def event(self, obj: dict) -> bool:
        return True

    def pod(self, kind: str, obj: dict) -> bool:
        self.pods.append((kind, obj["metadata"].get("resourceVersion", "")))
        return True


def follow(scripts: list) -> tuple[Api, Recorded, Stop]:
    stop, recorder = Stop(), Recorded()
    api = Api(stop, scripts)
    resource = k8s_watch.Resource(api, recorder, "ns", "pods", "Pod")  # type: ignore[arg-type]
    resource.follow(stop)
    return api, recorder, stop


def test_a_gone_version_lists_again_and_the_watch_goes_on_from_the_last_seen() -> None:
    api, recorder, stop = follow([
        [{"type": "ADDED", "object": pod("6")}, {"type": "ERROR", "object": {"code": 410}}],
        [{"type": "MODIFIED", "object": pod("8")}],
        ApiError("gone", 410, "Expired"),
    ])
    # Listed at 5, watched from 5; relisted at 7 after the ERROR, watched on from the last
    # delivery (8) once the watch ended; the API's 410 lists again (9).
    assert api.watched == ["5", "7", "8", "9"]
    assert recorder.pods == [("ADDED", "6"), ("MODIFIED", "8")]
    assert stop.waits == []


def test_failures_wait_a_doubling_backoff_that_a_delivery_resets() -> None:
    api, recorder, stop = follow([
        OSError("connection reset"),
        ApiError("boom", 500, "internal error"),
        [{"type": "ERROR", "object": {"code": 500, "message": "too old"}}],
        [{"type": "ADDED", "object": pod("6")}],
        [],
        OSError("again"),
    ])
    # A broken watch, the API's 500 and the watch's own ERROR: 1, 2, 4 s, the same version
    # watched again until the ERROR lists again (7); the delivery resets the backoff, so the
    # watch that ended at once without one and the next broken one wait 1 and 2 s.
    assert stop.waits == [1.0, 2.0, 4.0, 1.0, 2.0]
    assert recorder.pods == [("ADDED", "6")]
    assert api.watched == ["5", "5", "5", "7", "6", "6", "6"]
