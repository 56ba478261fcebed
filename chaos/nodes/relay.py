"""``python -m chaos.nodes.relay CONFIG_JSON -- ARGS...``: run a worker host in
a container and relay its stdin/stdout/stderr over the daemon's attach stream.

``HostClient(launcher=chaos.nodes.docker.launcher(...))`` starts this instead
of ``python`` itself, so the container's host speaks the same JSON lines as a
local one. The container runs ``<python> ARGS`` with ``CHAOS_HOST_SPEC`` from
our environment, on ``--network none``, with the run's label, volumes and
resource limits. It is created with ``stdin_once``: when this relay dies (even
by SIGKILL) the daemon closes the container's stdin, the host sees EOF and
exits; the run removes every labelled container at its end anyway. Our exit
status is the container's (137 after a ``container.kill()``).
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
import threading


def _pump_in(sock: socket.socket) -> None:
    try:
        while True:
            chunk = os.read(0, 65536)
            if not chunk:
                break
            sock.sendall(chunk)
    except OSError:
        pass
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _pump_out(sock: socket.socket) -> None:
    """Demultiplex the attach stream (8-byte frame headers: stream, size)."""
    buf = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except OSError:
            break
        if not chunk:
            break
        buf += chunk
        while len(buf) >= 8:
            stream, size = buf[0], struct.unpack(">I", buf[4:8])[0]
            if len(buf) < 8 + size:
                break
            data, buf = buf[8:8 + size], buf[8 + size:]
            fd = 1 if stream == 1 else 2
            os.write(fd, data)


def main(argv: list[str]) -> int:
    import docker

    config = json.loads(argv[0])
    args = argv[argv.index("--") + 1:]
    client = docker.DockerClient(base_url=config["base_url"]) if config.get("base_url") else docker.from_env()
    env = {"CHAOS_HOST_SPEC": os.environ.get("CHAOS_HOST_SPEC", "{}"), "PYTHONPATH": config["pythonpath"],
           "HOME": "/tmp"}
    api = client.api
    host_config = api.create_host_config(network_mode="none", binds=config["volumes"] or None, **config["limits"])
    created = api.create_container(config["image"], [config["python"], *args], name=config["name"],
                                   labels=config["labels"], environment=env, stdin_open=True,  # + detach=False: StdinOnce
                                   host_config=host_config)
    container = client.containers.get(created["Id"])
    try:
        raw = container.attach_socket(params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
        sock = getattr(raw, "_sock", raw)
        container.start()
        os.write(2, f"chaos relay: container {container.name} {container.id[:12]}\n".encode())
        threading.Thread(target=_pump_in, args=(sock,), daemon=True).start()
        _pump_out(sock)
        status = container.wait(timeout=30).get("StatusCode", 1)
    finally:
        try:
            container.remove(force=True)
        except Exception:
            pass
    return int(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
