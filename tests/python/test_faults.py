"""The module when the world moves under it: Ctrl-C while ggufkit.set waits for another edit's
lock (nothing applied, KeyboardInterrupt), and inputs truncated while they are read (GGUFError,
no temporary file left, the interpreter alive)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import ggufkit

VALUES = np.random.default_rng(7).standard_normal((64, 256)).astype(np.float32)


def write_model(path, tensors=4):
    w = ggufkit.GGUFWriter(path, "llama")
    w.add_name("faults")
    for i in range(tensors):
        w.add_tensor(f"blk.{i}.weight", VALUES + i)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def python(code: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


@pytest.fixture()
def locked(tmp_path):
    """A model, and another process holding its edit lock (flock) until the test ends."""
    path = tmp_path / "model.gguf"
    write_model(path, tensors=1)
    holder = python(f"""
        import fcntl, sys, time
        f = open({str(path)!r}, "rb")
        fcntl.flock(f, fcntl.LOCK_EX)
        print("locked", flush=True)
        time.sleep(60)
    """)
    assert holder.stdout.readline() == "locked\n"
    yield path
    holder.kill()
    holder.wait()


def test_ctrl_c_while_waiting_for_the_edit_lock(locked):
    before = locked.read_bytes()
    child = python(f"""
        import ggufkit
        print("editing", flush=True)
        try:
            ggufkit.set({str(locked)!r}, "general.name", "changed", sync=False)
        except KeyboardInterrupt:
            print("KeyboardInterrupt", flush=True)
            raise SystemExit(3)
        print("applied")
    """)
    assert child.stdout.readline() == "editing\n"
    time.sleep(0.3)  # the child is now waiting for the lock
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=30)
    assert (child.returncode, out, err) == (3, "KeyboardInterrupt\n", "")
    assert locked.read_bytes() == before
    assert sorted(os.listdir(locked.parent)) == ["model.gguf"]


def test_cancel_while_waiting_for_the_edit_lock(locked):
    before = locked.read_bytes()
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(ggufkit.GGUFError) as e:
        ggufkit.set(locked, "general.name", "changed", cancel=cancel, sync=False)
    assert time.monotonic() - started < 5
    assert (e.value.code, e.value.offset, e.value.record, e.value.file, str(e.value)) == (
        "cancelled", None, "", str(locked),
        f"{locked}: cancelled while waiting for another edit of the file to finish: nothing changed")
    assert locked.read_bytes() == before
