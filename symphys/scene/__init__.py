"""Scenes: their data types (`elements`, `scene`), the file reader
(`reader`, with `fields`) and the Python builder, and the named,
differentiable parameters (`params`)."""
