"""Helpers shared by the experiment and benchmark entry points."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

import jax


def device_description() -> str:
    """The device the figures were measured on, in words."""
    dev = jax.devices()[0]
    if dev.platform == "cpu":
        model = platform.processor() or "CPU"
        try:
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
        return f"cpu: {model}, {os.cpu_count()} cores (jax {jax.__version__})"
    return f"{dev.platform}: {dev.device_kind} x{jax.device_count()} (jax {jax.__version__})"


def publish(report: dict, text: str, json_path: Path | None) -> dict:
    """Print a report's text and, when asked, write the report as JSON."""
    print(text)
    if json_path:
        json_path = Path(json_path)
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report, indent=2))
        print(f"report written to {json_path}")
    return report
