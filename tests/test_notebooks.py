"""The example notebooks run top to bottom (reduced size)."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path, monkeypatch):
    monkeypatch.setenv("SYMPHYS_NOTEBOOK_QUICK", "1")
    monkeypatch.setenv("SYMPHYS_NOTEBOOK_BACKEND", "numba")
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=1800, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors


def test_notebooks_are_numbered_in_order():
    """01_, 02_, ...: one notebook per number, none skipped."""
    numbers = [int(p.name.split("_")[0]) for p in NOTEBOOKS]
    assert numbers == list(range(1, len(NOTEBOOKS) + 1)), [p.name for p in NOTEBOOKS]
