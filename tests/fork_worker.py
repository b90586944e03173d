"""Scaffolding shared by the SIGKILL tests: a helper process that forks the processes to kill.

A worker script imports the package once (so every fork starts at once), prints ``ready`` and
serves one command per stdin line through :func:`serve`; ``reap PID`` and ``quit`` are built in.
The test side starts it with :func:`worker_process` and talks to it with :func:`ask`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- worker side


def fork_call(target: Callable[..., object], *args: object) -> int:
    """Fork a child that runs ``target(*args)`` and exits with its int result (254 otherwise,
    255 if it raised); return the child's pid."""
    pid = os.fork()
    if pid == 0:
        code: object = 255
        try:
            code = target(*args)
        finally:
            os._exit(code if isinstance(code, int) else 254)
    return pid


def serve(commands: dict[str, Callable[..., object]]) -> None:
    """Print ``ready``, then for each stdin line ``NAME ARG…`` print ``commands[NAME](*ARGS)``."""
    print("ready", flush=True)
    for line in sys.stdin:
        command, *args = line.split()
        if command == "quit":
            return
        if command == "reap":
            print(os.waitpid(int(args[0]), 0)[1], flush=True)
        elif command in commands:
            print(commands[command](*args), flush=True)
        else:
            raise SystemExit(f"unknown command {command!r}")


# --------------------------------------------------------------------------- test side


@contextlib.contextmanager
def worker_process(script: Path) -> Iterator[subprocess.Popen[str]]:
    """Run ``script`` as a worker (the project root on PYTHONPATH) until the block ends."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, str(script)], cwd=ROOT, env=env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert ask(proc, None) == "ready"
        yield proc
        ask(proc, "quit", expect_reply=False)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def ask(proc: subprocess.Popen[str], command: str | None, *, expect_reply: bool = True) -> str:
    """Send ``command`` (None: nothing) and return the worker's one-line reply."""
    assert proc.stdin is not None and proc.stdout is not None
    if command is not None:
        proc.stdin.write(command + "\n")
        proc.stdin.flush()
    if not expect_reply:
        return ""
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"worker {proc.args!r} exited with {proc.wait()}")
    return line.strip()


def kill_and_reap(proc: subprocess.Popen[str], child: int) -> None:
    """SIGKILL the worker's child ``child`` and reap it through the worker; it must have died of the kill."""
    os.kill(child, signal.SIGKILL)
    status = int(ask(proc, f"reap {child}"))
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status
