"""Run an exported symphys function (jax backend) without symphys or
PyTensor: `symphys export` copies this file into the folder as load.py.
It needs only

    pip install jax jaxlib flatbuffers numpy

(flatbuffers reads the serialised function). manifest.json lists the
inputs and outputs in order.

    python load.py [FOLDER [OUT.npz]]   # runs example.npz, compares bitwise

or, from Python:

    call, manifest = load("FOLDER")
    outputs = call(*inputs)      # NumPy arrays in, list of NumPy arrays out
"""
import json
import sys
from pathlib import Path

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)   # the function is float64
from jax import export  # noqa: E402


def load(folder):
    folder = Path(folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    (name,) = [f["file"] for f in manifest["files"] if f["kind"] == "jax-export"]
    exported = export.deserialize(bytearray((folder / name).read_bytes()))
    run = jax.jit(exported.call)

    def call(*inputs):
        return [np.asarray(o) for o in jax.tree_util.tree_leaves(run(*inputs))]
    return call, manifest


if __name__ == "__main__":
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
    call, manifest = load(folder)
    if not (folder / "example.npz").exists():
        sys.exit("no example.npz to run (exported without example_inputs)")
    data = np.load(folder / "example.npz")
    outputs = call(*[data[f"input{i}"] for i in range(len(manifest["inputs"]))])
    if len(sys.argv) > 2:
        np.savez(sys.argv[2], **{f"output{i}": o for i, o in enumerate(outputs)})
    same = all(np.array_equal(o, data[f"output{i}"]) for i, o in enumerate(outputs))
    print(f"{len(outputs)} output{'' if len(outputs) == 1 else 's'}",
          "equal to" if same else "DIFFER from", "example.npz")
    sys.exit(0 if same else 1)
