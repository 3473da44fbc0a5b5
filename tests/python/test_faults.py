"""The module when the world moves under it: Ctrl-C while ggufkit.set waits for another edit's
lock (nothing applied, KeyboardInterrupt), and inputs truncated while they are read (GGUFError,
no temporary file left, the interpreter alive)."""
from __future__ import annotations

import json
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


# ---- inputs truncated while they are read ------------------------------------------------------

def run_json(code: str, *args) -> dict:
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)], capture_output=True, text=True,
                       timeout=120)
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    return json.loads(r.stdout)


def test_quantize_model_of_an_input_truncated_while_read(tmp_path):
    src, out_dir = tmp_path / "model.gguf", tmp_path / "out"
    write_model(src)
    out_dir.mkdir()
    header = ggufkit.GGUFReader(src).data_offset
    result = run_json("""
        import json, os, sys
        import ggufkit
        src, out, header = sys.argv[1], sys.argv[2], int(sys.argv[3])
        calls = []
        def progress(done, total):  # the first tensor is written: the rest of the file goes
            calls.append(done)
            if done == 1:
                os.truncate(src, header)
        try:
            ggufkit.quantize_model(src, out, "Q8_0", progress=progress, threads=2)
            print(json.dumps({"raised": None}))
        except ggufkit.GGUFError as e:
            print(json.dumps({"raised": [e.code, e.offset, e.record, e.file, str(e)], "calls": calls}))
    """, src, out_dir / "q8.gguf", header)
    assert result["raised"] == ["io_error", None, "", str(src), f"{src}: the file was truncated or became unreadable "
                                "while it was read (bus error); nothing was written"]
    assert result["calls"][0] == 1
    assert os.listdir(out_dir) == []  # no output, no temporary


def test_tensor_data_of_a_file_truncated_while_open(tmp_path):
    src = tmp_path / "model.gguf"
    write_model(src)
    result = run_json("""
        import json, subprocess, sys
        import numpy as np
        import ggufkit
        src = sys.argv[1]
        r = ggufkit.GGUFReader(src)
        t = r.tensors[3]
        view = t.data  # a view of the mapping, taken before the file shrinks
        subprocess.run(["truncate", "-s", str(r.data_offset), src], check=True)  # another process
        out = {"offset": t.data_offset, "data_offset": r.data_offset}
        try:
            t.data
        except ggufkit.GGUFError as e:
            out["data"] = [e.code, e.offset, e.record, e.file, str(e)]
        out["sum"] = float(view.sum())  # the held view reads zeros where the bytes are gone, no SIGBUS
        try:
            ggufkit.quantize(view, ggufkit.GGMLQuantizationType.Q8_0)
        except ggufkit.GGUFError as e:
            out["quantize"] = [e.code, e.offset, str(e)]
        print(json.dumps(out))
    """, src)
    offset, size = result["offset"], result["data_offset"]
    assert result["data"] == ["truncated", offset, "blk.3.weight", str(src),
                              f"{src}: offset {offset}: 'blk.3.weight': the file was truncated after it was opened "
                              f"(it is now {size} bytes): the tensor's data are gone"]
    assert result["sum"] == 0.0
    assert result["quantize"] == ["io_error", None, "the data were in a mapped file that was truncated or became "
                                  "unreadable while it was read (bus error; read as zeros)"]
