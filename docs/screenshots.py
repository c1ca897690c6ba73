"""Screenshots of ``ik-layer view`` for every built-in robot: docs/img/viewer_<robot>.png.

With example-robot-data installed, also the built-in panda drawn with that package's meshes
(``--urdf``): docs/img/viewer_panda_meshes.png. Each robot is shown reaching a fixed random (reachable)
target, in headless Chromium (WebGL in software: SwiftShader) driven over the DevTools protocol, so the
page can render before the picture is taken.

    apt-get install -y chromium          # Debian's package; or give --chromium PATH
    pip install 'ik-layer[view]'
    python docs/screenshots.py           # --robots ur5e panda --out docs/img --size 1280x800
"""

from __future__ import annotations

import argparse
import base64
import itertools
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from websockets.sync.client import ClientConnection, connect

from ik_layer.robots import builtin_robots
from ik_layer.testing import example_robot_data_dir, free_port
from ik_layer.viewer import Viewer

ROOT = Path(__file__).resolve().parents[1]
SEEDS = {"panda": 4, "ur5e": 3, "iiwa14": 2, "planar3": 1}  # targets that make a readable picture
MESHES = {"panda": "panda_description/urdf/panda.urdf"}  # example-robot-data URDFs with the built-ins' link names
HIDE_NOTIFICATIONS = """
const style = document.createElement('style');
style.textContent = '.mantine-Notifications-root { display: none !important; }';
document.head.appendChild(style);
"""
PAGE_READY = "document.querySelector('canvas') !== null && document.body.innerText.includes('Target')"


class DevTools:
    """A minimal Chrome DevTools protocol session on one page."""

    def __init__(self, socket: ClientConnection) -> None:
        self.socket = socket
        self.ids = itertools.count(1)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        call_id = next(self.ids)
        self.socket.send(json.dumps({"id": call_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=60))
            if message.get("id") == call_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, expression: str) -> Any:
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")


@contextmanager
def chromium(executable: str, width: int, height: int) -> Iterator[DevTools]:
    """Headless Chromium with SwiftShader WebGL; a DevTools session on its page."""
    port = free_port()
    with tempfile.TemporaryDirectory() as profile:
        command = [
            executable, "--headless", "--no-sandbox", "--use-angle=swiftshader", "--enable-unsafe-swiftshader",
            "--ignore-gpu-blocklist", "--hide-scrollbars", f"--window-size={width},{height}",
            f"--remote-debugging-port={port}", f"--user-data-dir={profile}", "about:blank",
        ]  # fmt: skip
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            page = _page_socket_url(port)
            with connect(page, max_size=None, open_timeout=30) as socket:
                yield DevTools(socket)
        finally:
            process.terminate()
            process.wait(timeout=30)


def _page_socket_url(port: int, within: float = 30) -> str:
    deadline = time.monotonic() + within
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2) as answer:
                pages = [t for t in json.load(answer) if t.get("type") == "page"]
            if pages:
                return pages[0]["webSocketDebuggerUrl"]
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("Chromium's DevTools endpoint did not come up")
        time.sleep(0.2)


def shoot(devtools: DevTools, url: str, path: Path, size: tuple[int, int], settle: float) -> None:
    """Open ``url`` at ``size``, wait until the scene and panel are there, let it render ``settle`` s, save a PNG."""
    width, height = size
    devtools.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
    devtools.call("Page.enable")
    devtools.call("Page.navigate", url=url)
    deadline = time.monotonic() + 60
    while not devtools.evaluate(PAGE_READY):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not show the viewer within 60 s")
        time.sleep(0.25)
    devtools.evaluate(HIDE_NOTIFICATIONS)
    time.sleep(settle)  # meshes arrive over the websocket; SwiftShader renders slowly
    png = devtools.call("Page.captureScreenshot", format="png")["data"]
    path.write_bytes(base64.b64decode(png))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robots", nargs="+", default=builtin_robots(), help="(default: every built-in robot)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    parser.add_argument("--size", default="1280x800", help="window WIDTHxHEIGHT (default 1280x800)")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds to let the page render (default 3)")
    parser.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    args = parser.parse_args(argv)
    if not args.chromium:
        parser.error("Chromium not found: apt-get install chromium, or give --chromium PATH")
    width, height = (int(x) for x in args.size.split("x"))
    args.out.mkdir(parents=True, exist_ok=True)
    shots = [(name, None, f"viewer_{name}.png") for name in args.robots]
    erd = example_robot_data_dir()
    if erd is not None:
        shots += [(name, erd / MESHES[name], f"viewer_{name}_meshes.png") for name in args.robots if name in MESHES]
    with chromium(args.chromium, width, height) as devtools:
        for name, urdf, file_name in shots:
            with Viewer(name, urdf=urdf, port=free_port()) as viewer:
                robot = viewer.robot
                q = robot.random_q(generator=torch.Generator().manual_seed(SEEDS.get(name, 0)))
                result = viewer.set_target(robot.fk(q))
                viewer.aim_camera()
                shoot(devtools, viewer.url, args.out / file_name, (width, height), args.settle)
                print(f"{args.out / file_name}: target reached {bool(result.success)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
