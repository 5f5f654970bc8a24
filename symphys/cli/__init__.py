"""The `symphys` command line (`main`), with its `sysid` and `export`
commands."""
