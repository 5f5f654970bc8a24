"""Compiled functions written to a folder (`write`) and read back (`read`)
in another process; the folder's format is `manifest`."""
