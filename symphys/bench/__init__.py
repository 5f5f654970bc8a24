"""`symphys bench` and `symphys bench-gpu`: speed and memory measured side by
side with the peers (MuJoCo, a hand-written kernel)."""
